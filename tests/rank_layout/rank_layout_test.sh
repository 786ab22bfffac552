#!/usr/bin/env bash
# The Python twin of the rank layout gives the C++ class's answers (tests/rank_layout/compare.py).
set -euo pipefail
tests/rank_layout/rank_layout_dump 1,1,1 4,1,1 2,3,1 2,2,2 3,2,4 1,5,2 4,8,8 16,2,8 0,1,1 1,0,1 1,1,0 |
  PYTHONPATH=python /usr/bin/python3 tests/rank_layout/compare.py
