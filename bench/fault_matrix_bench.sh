#!/usr/bin/env bash
# bazel run -c opt //bench:fault_matrix_bench [-- --runs 10]: fault_matrix_bench.py over the built
# coordinator, worker and pipectl.
set -euo pipefail
cd "${RUNFILES_DIR:-$0.runfiles}/pipecoord"
exec /usr/bin/python3 bench/fault_matrix_bench.py "$@"
