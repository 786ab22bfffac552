#!/usr/bin/env bash
# Soak (tests/soak_driver.py): 100 jobs of random shapes back to back on 4 workers, bursts of
# submissions, workers and the coordinator SIGKILLed and restarted mid-way; every job ends as it
# should, no session mismatch, every worker free at the end. Three seeds (each found bugs the
# others did not: a spare left holding a job, a v-auto shape with no schedule, a finished rank
# taken for lost across a coordinator restart); SOAK_SEEDS and SOAK_JOBS vary it.
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export COORDINATOR WORKER PIPECTL
for seed in ${SOAK_SEEDS:-13 2 14}; do
  dir="$WORK/seed-$seed"
  mkdir -p "$dir"
  if ! WORK="$dir" SOAK_SEED=$seed PYTHONPATH="$gen:python" /usr/bin/python3 tests/soak_driver.py; then
    for f in "$dir"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
    fail "soak (seed $seed)"
  fi
done
