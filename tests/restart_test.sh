#!/usr/bin/env bash
# SIGKILL the coordinator at random points in a loop of submits and telemetry batches; after a
# restart on the same --state file, every acknowledged job, step and action, and every event a
# client was shown, is there.
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
PYTHONPATH="$gen" /usr/bin/python3 tests/restart_driver.py "$COORDINATOR" "$WORK" 15 || fail "acknowledged state lost"
echo "restart: ok"
