#!/usr/bin/env bash
# A job that trains on a token dataset (spec.data) with validation (evalEvery) over real
# processes: pipectl data prepare writes the data, a coordinator and four workers (pp 2 x dp 2)
# train on it; the validation loss appears in pipectl status (text and JSON), in /metrics
# (pipecoord_validation_loss, nats and bits per byte) and in the dashboard's curve data. Bad data
# is refused at submit (exit 2, the file and the rule), before any worker gets the job.
source tests/lib.sh
start_coordinator --http 127.0.0.1:0
HTTP=$(sed -n 's/^coordinator http on \([^ ]*\) .*/\1/p' "$WORK/coordinator.log")
[ -n "$HTTP" ] || fail "no http address in the coordinator's log"
start_workers 4

# Text to a byte-level dataset: DATA/train.* and DATA/val.* (the last 10 %).
/usr/bin/python3 -c '
import sys
words = "the pipeline keeps every rank busy while micro-batches flow forward and gradients flow back".split()
with open(sys.argv[1], "w") as f:
    for i in range(3000):
        f.write(" ".join(words[(i * 7 + k) % len(words)] for k in range(6)) + ".\n")' "$WORK/text.txt"
"$PIPECTL" data prepare "$WORK/text.txt" --out "$WORK/data" > "$WORK/prepare.out" || fail "data prepare"

# Bad data first: each refused at submit with the file and the rule; no job is stored.
expect_refused() {  # expect_refused "message fragment" overrides...
  local text=$1 rc=0
  shift
  job_json "$WORK/bad.json" model.vocab=256 model.seqLen=16 "$@"
  "$PIPECTL" submit "$WORK/bad.json" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" = 2 ] || fail "submit with $* exited $rc, want 2: $(cat "$WORK/err")"
  grep -qF -- "$text" "$WORK/err" || fail "submit with $*: stderr lacks \"$text\": $(cat "$WORK/err")"
}
expect_refused "$WORK/missing: no dataset" "data={\"path\": \"$WORK/missing\"}"
expect_refused "$WORK/data/train.json: vocab_size 256 is larger than the model's vocabulary (64)" \
  "data={\"path\": \"$WORK/data\"}" model.vocab=64
head -c 1001 "$WORK/data/train.bin" > "$WORK/cut.bin" && cp "$WORK/data/train.json" "$WORK/cut.json"
expect_refused "$WORK/cut.bin: 1001 bytes is not a whole number of uint16 tokens" "data={\"path\": \"$WORK/cut\"}"
expect_refused "spec.evalEvery: needs spec.data" evalEvery=2
[ "$("$PIPECTL" jobs --format json | json_field '.get("jobs", [])')" = "[]" ] || fail "a refused job was stored"

job_json "$WORK/job.json" pp=2 dp=2 steps=6 model.vocab=256 model.seqLen=16 evalEvery=2 evalBatches=2 \
  "data={\"path\": \"$WORK/data\"}"
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "watch exit $?: $(cat "$WORK/watch.out")"
grep -qE "step 2/6  loss [0-9.]+ \([0-9.]+ bpb\)  val [0-9.]+ \([0-9.]+ bpb\)" "$WORK/watch.out" ||
  fail "watch shows no validation loss at step 2: $(cat "$WORK/watch.out")"

"$PIPECTL" status "$job" --format json > "$WORK/status.json"
"$PIPECTL" status "$job" > "$WORK/status.txt"
curl -sf "http://$HTTP/metrics" > "$WORK/metrics.txt" || fail "GET /metrics"
curl -sf "http://$HTTP/api/job?id=$job" > "$WORK/dashboard.json" || fail "GET /api/job"
/usr/bin/python3 - "$WORK" "$job" <<'PY' || fail "validation loss checks"
import json, math, re, sys
work, job = sys.argv[1], sys.argv[2]
status = json.load(open(work + "/status.json"))
assert status["state"] == "SUCCEEDED", status["state"]
steps = status["steps"]
val = {s.get("step", 0): s["valLoss"] for s in steps if s.get("hasValLoss")}
assert sorted(val) == [1, 3, 5], val          # after every 2nd step (and the last)
assert all(0 < v < math.log(256) for v in val.values()), val
assert val[5] < val[1], val                   # it learns the text
last = val[5]
# pipectl status (text): first and last, nats and bits per byte.
text = open(work + "/status.txt").read()
want = "val loss  %.4f (%.3f bpb) at step 1 -> %.4f (%.3f bpb) at step 5" % (val[1], val[1] / math.log(2), last, last / math.log(2))
assert want in text, (want, text)
# /metrics: the last validation, in nats and in bits per byte.
metrics = open(work + "/metrics.txt").read()
def gauge(unit):
    m = re.search(r'^pipecoord_validation_loss\{job_id="%s",unit="%s"\} (\S+)$' % (job, unit), metrics, re.M)
    assert m, (unit, [l for l in metrics.splitlines() if "validation" in l])
    return float(m.group(1))
assert abs(gauge("nats") - last) < 1e-9 * max(1, last), (gauge("nats"), last)
assert abs(gauge("bits_per_byte") - last / math.log(2)) < 1e-9, gauge("bits_per_byte")
# The dashboard's curve data: one point per validation, null elsewhere.
series = json.load(open(work + "/dashboard.json"))["series"]
points = [(s, v) for s, v in zip(series["step"], series["val_loss"]) if v is not None]
assert [s for s, _ in points] == [1, 3, 5] and abs(points[-1][1] - last) < 1e-12, points
assert abs(series["val_bits_per_byte"][series["step"].index(5)] - last / math.log(2)) < 1e-12
print("validation loss %s nats at steps 1, 3, 5" % [round(val[s], 4) for s in (1, 3, 5)])
PY

# The dataset truncated under a running job (it is memory-mapped: reading past the new end
# faults): the job fails naming the file, and every worker lives on.
cp -r "$WORK/data" "$WORK/doomed"
job_json "$WORK/doomed.json" pp=2 dp=2 steps=100000 model.vocab=256 model.seqLen=16 "data={\"path\": \"$WORK/doomed\"}"
doomed=$("$PIPECTL" submit "$WORK/doomed.json" --format json | json_field '["jobId"]')
for _ in $(seq 600); do
  [ "$("$PIPECTL" status "$doomed" --format json | json_field '.get("stepsDone", 0)')" -ge 2 ] && break
  sleep 0.02
done
truncate -s 0 "$WORK/doomed/train.bin"
timeout 60 "$PIPECTL" watch "$doomed" > /dev/null && fail "the job on a truncated dataset succeeded"
cause=$("$PIPECTL" status "$doomed" --format json | json_field '["failureCause"]')
[[ "$cause" == *"$WORK/doomed/train.bin: reading tokens "*" faulted (SIGBUS): the file was truncated or replaced while the job ran"* ]] ||
  fail "the cause does not name the truncated file: $cause"
sleep 0.5
[ "$("$PIPECTL" workers --format json | json_field '["workers"].__len__()')" = "4" ] || fail "a worker died of the truncated file"
for p in "${PIDS[@]}"; do kill -0 "$p" || fail "process $p died"; done
echo "truncated dataset: $cause"
echo "PASS"
