#!/usr/bin/env bash
# The pasted known answers are what the independent Python implementation prints.
exec /usr/bin/python3 kernels/cpu/known_answers.py --check
