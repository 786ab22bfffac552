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

# cancel --checkpoint: every rank stops after the same step and checkpoints it, then CANCELLED.
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()
CKPT="$WORK/cancel-checkpoints"
start_coordinator
start_workers 2 --checkpoint-dir "$CKPT"
job_json "$WORK/plain.json" steps=100000
plain=$("$PIPECTL" submit "$WORK/plain.json" --format json | json_field '["jobId"]')
for _ in $(seq 200); do [ "$("$PIPECTL" status "$plain" --format json | json_field '["state"]')" = RUNNING ] && break; sleep 0.05; done
rc=0
"$PIPECTL" cancel "$plain" --checkpoint 2> "$WORK/err" || rc=$?
[ "$rc" = 1 ] && grep -qF "checkpoint: $plain saves no checkpoints (spec.checkpointEvery 0)" "$WORK/err" ||
  fail "cancel --checkpoint of a job without checkpoints: exit $rc, $(cat "$WORK/err")"
"$PIPECTL" cancel "$plain" > /dev/null
job_json "$WORK/ck.json" steps=100000 checkpointEvery=5
ck=$("$PIPECTL" submit "$WORK/ck.json" --format json | json_field '["jobId"]')
wait_steps "$ck" 7
"$PIPECTL" cancel "$ck" --checkpoint | grep -qx "$ck RUNNING: stopping after a step every rank checkpoints, then CANCELLED" ||
  fail "cancel --checkpoint output"
rc=0
timeout 60 "$PIPECTL" watch "$ck" > /dev/null || rc=$?
[ "$rc" = 1 ] || fail "watch of the cancelled job exited $rc"
"$PIPECTL" status "$ck" --format json > "$WORK/ck.status.json"
/usr/bin/python3 - "$WORK/ck.status.json" "$CKPT" <<'PY' || fail "cancel --checkpoint checks"
import json, os, re, sys
job, ckpt = json.load(open(sys.argv[1])), sys.argv[2]
assert job["state"] == "CANCELLED", job["state"]
events = [e["message"] for e in job["events"]]
asked = [m for m in events if m.startswith("cancelling: every rank stops after step ")]
assert len(asked) == 1, events
n = int(re.search(r"after step (\d+)", asked[0]).group(1))
assert "CANCELLED: cancelled by the user after step %d, checkpointed on every rank" % n in events, events
assert job["checkpointedSteps"] == n + 1, (job["checkpointedSteps"], n)
assert [s.get("step", 0) for s in job["steps"]][-1] == n, "the last step measured is the one checkpointed"
for g in (0, 1):
    path = os.path.join(ckpt, job["id"], "rank-%d" % g, "step-%d.safetensors" % n)
    assert os.path.exists(path), (path, os.listdir(os.path.join(ckpt, job["id"], "rank-%d" % g)))
print("cancel --checkpoint: every rank stopped after step %d with its checkpoint (checkpoints every 5)" % n)
PY
echo "e2e cancel: ok"
