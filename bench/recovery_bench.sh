#!/usr/bin/env bash
# bazel run -c opt //bench:recovery_bench: recovery_bench.py over the built coordinator and worker.
set -euo pipefail
cd "${RUNFILES_DIR:-$0.runfiles}/pipecoord"
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
PYTHONPATH="$gen" exec /usr/bin/python3 bench/recovery_bench.py "$@"
