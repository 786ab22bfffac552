#!/usr/bin/env bash
# Cancel a running job: it ends CANCELLED, its workers stop and take the next job.
source tests/lib.sh
start_coordinator
start_workers 2

job_json "$WORK/long.json" steps=100000 model.hidden=64 model.seqLen=32
job=$("$PIPECTL" submit "$WORK/long.json" --format json | json_field '["jobId"]')
for _ in $(seq 200); do
  done_steps=$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')
  [ "$done_steps" -ge 2 ] && break
  sleep 0.05
done
[ "$done_steps" -ge 2 ] || fail "the job never made progress"
"$PIPECTL" cancel "$job" | grep -q "$job CANCELLED" || fail "cancel output"
s1=$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')
rc=0
"$PIPECTL" watch "$job" > /dev/null || rc=$?
[ "$rc" = 1 ] || fail "watch of a cancelled job should exit 1, got $rc"

job_json "$WORK/short.json" steps=2
job2=$("$PIPECTL" submit "$WORK/short.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job2" > /dev/null || fail "the next job did not succeed"
# The next job ran on the cancelled job's workers, so they had left it; and no step of the
# cancelled job was counted after the cancel answered (a condition, not a timed window).
w1=$("$PIPECTL" status "$job" --format json | /usr/bin/python3 -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin)["workerIds"])))')
w2=$("$PIPECTL" status "$job2" --format json | /usr/bin/python3 -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin)["workerIds"])))')
[ -n "$w1" ] && [ "$w1" = "$w2" ] || fail "the next job ran on other workers ($w1 / $w2)"
s2=$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')
[ "$s1" = "$s2" ] || fail "cancelled job still stepping ($s1 -> $s2)"
echo "e2e cancel: ok"
