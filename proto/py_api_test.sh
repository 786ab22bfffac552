#!/usr/bin/env bash
# Runs py_api_test.py with Debian's python3 (the one that has python3-grpcio and python3-protobuf)
# and the generated modules on the path.
set -euo pipefail
gen=$(dirname "$(readlink -f proto/job_pb2.py)")
PYTHONPATH="$(dirname "$gen")" exec /usr/bin/python3 proto/py_api_test.py
