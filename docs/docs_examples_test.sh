#!/usr/bin/env bash
set -euo pipefail
exec /usr/bin/python3 tools/docs_examples.py --pipectl cli/pipectl docs/*.md
