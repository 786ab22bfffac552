#!/usr/bin/env bash
# bazel run -c opt //bench:probe_cost_bench [-- --rounds 5]: probe_cost_bench.py over the built
# coordinator, worker and pipectl.
set -euo pipefail
cd "${RUNFILES_DIR:-$0.runfiles}/pipecoord"
exec /usr/bin/python3 bench/probe_cost_bench.py "$@"
