#!/usr/bin/env bash
# Soak (tests/soak_driver.py): 100 jobs of random shapes back to back on 4 workers, bursts of
# submissions, workers and the coordinator SIGKILLed and restarted mid-way; every job ends as it
# should, no session mismatch, every worker free at the end. SOAK_JOBS and SOAK_SEED vary it.
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export COORDINATOR WORKER PIPECTL WORK
PYTHONPATH="$gen:python" /usr/bin/python3 tests/soak_driver.py || fail "soak"
