#!/usr/bin/env bash
# A job that trains on a token dataset (spec.data) with validation (evalEvery) over real
# processes: pipectl data prepare writes the data, a coordinator and four workers (pp 2 x dp 2)
# train on it; the validation loss appears in pipectl status (text and JSON), in /metrics
# (pipecoord_validation_loss, nats and bits per byte) and in the dashboard's curve data. Bad data
# is refused at submit (exit 2, the file and the rule), before any worker gets the job. A Hugging
# Face tokenizer.json (pipectl data prepare --tokenizer, through the tokenizers package) makes a BPE
# dataset the workers train on.
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

# --- A Hugging Face tokenizer: a byte-level BPE trained here by the tokenizers package itself,
#     and the same with 66,000 added tokens (ids past uint16). The files hold exactly what the
#     tokenizer encodes each document to (read back with numpy), pipectl data check reads them,
#     a bad tokenizer file is refused naming it, and a pp 2 x dp 2 job trains on the BPE tokens. ---
export PIPECOORD_PYTHON="$PYTHON" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" - "$WORK" <<'PY' || fail "training a tokenizer with the tokenizers package"
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
work = sys.argv[1]
with open(work + "/doc2.txt", "w", encoding="utf-8") as f:
    f.write("Grüße: the pipeline keeps every rank busy, ünïcödé too.\n" * 40)
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train([work + "/text.txt", work + "/doc2.txt"],
          trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tok.save(work + "/bpe.json")
tok.add_tokens([f"<extra_{i}>" for i in range(66000)])
tok.save(work + "/big.json")
PY
"$PIPECTL" data prepare "$WORK/text.txt" "$WORK/doc2.txt" --tokenizer "$WORK/bpe.json" --out "$WORK/bpe" \
  --format json > "$WORK/bpe.out" || fail "data prepare --tokenizer: $(cat "$WORK/bpe.out")"
"$PIPECTL" data prepare "$WORK/text.txt" "$WORK/doc2.txt" --tokenizer "$WORK/big.json" --out "$WORK/big" \
  --val-fraction 0 > "$WORK/big.out" || fail "data prepare --tokenizer (uint32)"
"$PYTHON" - "$WORK" <<'PY' || fail "the BPE dataset differs from the tokenizer's own encoding"
import json, sys
import numpy as np
from tokenizers import Tokenizer
work = sys.argv[1]
docs = [open(work + p, encoding="utf-8").read() for p in ("/text.txt", "/doc2.txt")]
for name, splits in (("bpe", ("train", "val")), ("big", ("train",))):
    tok = Tokenizer.from_file(f"{work}/{name}.json")
    want = [tok.encode(d, add_special_tokens=False).ids for d in docs]
    got, starts, at = [], [], 0
    for split in splits:
        side = json.load(open(f"{work}/{name}/{split}.json"))
        assert side["vocab_size"] == tok.get_vocab_size(with_added_tokens=True), side
        assert side["dtype"] == ("uint16" if name == "bpe" else "uint32"), side
        ids = np.fromfile(f"{work}/{name}/{split}.bin", dtype="<u2" if side["dtype"] == "uint16" else "<u4")
        assert side["tokens"] == len(ids), side
        starts += [at + s for s in side["document_starts"]]
        got += ids.tolist()
        at += len(ids)
    assert got == want[0] + want[1], (len(got), len(want[0]) + len(want[1]))
    assert starts[0] == 0 and len(want[0]) in starts, (starts, len(want[0]))  # the second document's start
    print(f"{name}: {len(got)} tokens (vocabulary {tok.get_vocab_size(with_added_tokens=True)}) equal the "
          f"tokenizer's own encoding; documents at {starts}")
PY
"$PIPECTL" data check "$WORK/bpe/train" "$WORK/bpe/val" > "$WORK/check.out" || fail "data check of the BPE dataset"
rc=0
"$PIPECTL" data prepare "$WORK/text.txt" --tokenizer "$WORK/text.txt" --out "$WORK/nope" 2> "$WORK/err" || rc=$?
[ "$rc" = 2 ] || fail "a bad tokenizer file: exit $rc, want 2"
grep -qF "$WORK/text.txt: not a tokenizer.json the tokenizers package reads" "$WORK/err" ||
  fail "a bad tokenizer file: $(cat "$WORK/err")"
vocab=$(json_field '["vocab_size"]' < "$WORK/bpe.out")
job_json "$WORK/bpe-job.json" pp=2 dp=2 steps=6 model.vocab="$vocab" model.seqLen=16 \
  "data={\"path\": \"$WORK/bpe\"}"
job=$("$PIPECTL" submit "$WORK/bpe-job.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job" > "$WORK/watch-bpe.out" || fail "the BPE job: $(tail -3 "$WORK/watch-bpe.out")"
"$PIPECTL" status "$job" --format json > "$WORK/status-bpe.json"
/usr/bin/python3 - "$WORK/status-bpe.json" <<'PY' || fail "the BPE job did not learn"
import json, sys
job = json.load(open(sys.argv[1]))
losses = [s["loss"] for s in job["steps"]]
assert job["state"] == "SUCCEEDED" and len(losses) == 6 and losses[-1] < losses[0], (job["state"], losses)
print(f"BPE tokens (vocabulary {job['spec']['model']['vocab']}): losses {' '.join('%.3f' % l for l in losses)}")
PY
echo "PASS"
