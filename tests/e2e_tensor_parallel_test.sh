#!/usr/bin/env bash
# Tensor parallelism and ZeRO over real processes: a coordinator and 8 CPU workers run a tp 2 x
# pp 2 x dp 2 job with zero 1 to SUCCEEDED; the coordinator places each tp group on one host and says so; every step's
# loss equals the same job's at tp 1 (run next on 4 of the workers) within 1e-5; every rank's peak
# is its budget; then a tp 2 + sequence parallelism job with ZeRO-2 and full recompute on the same
# workers trains to the same losses, sending its step 2 folded and each tp group's timings from its
# rank 0.
source tests/lib.sh
start_coordinator --http 127.0.0.1:0
HTTP=$(sed -n 's/^coordinator http on \([^ ]*\) .*/\1/p' "$WORK/coordinator.log")
start_workers 8

# spec.optimizer: warmup, cosine decay, weight decay and clipping by the global norm.
OPT='optimizer={"lrSchedule":"cosine","warmupSteps":1,"minLr":0.001,"weightDecay":0.1,"clipGradNorm":0.5}'
job_json "$WORK/tp.json" tp=2 pp=2 dp=2 zero=1 microbatches=4 model.layers=4 model.ffnHidden=64 steps=4 "$OPT"
job=$("$PIPECTL" submit "$WORK/tp.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "watch exit $?: $(tail -5 "$WORK/watch.out")"
grep -q "SUCCEEDED" "$WORK/watch.out" || fail "no SUCCEEDED event: $(tail -5 "$WORK/watch.out")"
"$PIPECTL" status "$job" --format json > "$WORK/tp-status.json"
"$PIPECTL" status "$job" > "$WORK/tp-status.txt"
grep -q "submitted: 1f1b, pp 2, dp 2, tp 2, zero 1, waiting for 8 worker(s)" "$WORK/tp-status.txt" ||
  fail "pipectl status does not show the job's tp and zero: $(cat "$WORK/tp-status.txt")"
grep -q "running on 8 worker(s); tp groups on one host each (4 groups of 2 ranks)" "$WORK/tp-status.txt" ||
  fail "pipectl status does not say where the tp groups landed: $(cat "$WORK/tp-status.txt")"
grep -qE "^grad norm [0-9.e+-]+ at step 3 \(max [0-9.e+-]+ at step [0-3]\), clipped to 0.5 in [1-4] of 4 step\(s\)$" "$WORK/tp-status.txt" ||
  fail "pipectl status does not show the gradient norm and clipping: $(cat "$WORK/tp-status.txt")"
grep -q "^lr        0.01 at step 0 -> 0.00325 at step 3$" "$WORK/tp-status.txt" ||
  fail "pipectl status does not show the learning rate's course: $(cat "$WORK/tp-status.txt")"

# The trace shows each compute action's tensor-parallel collectives: time, and bytes equal to the
# closed form. Tokens n = 2 x 8, hidden 32, tp 2: an all-reduce of n x h floats sends
# 2 (tp-1)/tp n h 4 = 2048 B from each rank. F of stage 0: the embedding's and 2 blocks x 2 (5);
# stage 1: 2 blocks x 2 (4) + the head's maxima gathered (n floats: 64 B) and S, z summed (2n:
# 128 B); BW of stage 1: 4 + the head's input gradient (5); of stage 0: 4.
"$PIPECTL" trace "$job" --out "$WORK/trace.json" > /dev/null || fail "pipectl trace"
/usr/bin/python3 - "$WORK/trace.json" <<'PY' || fail "trace: tensor-parallel collectives"
import collections, json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["pid"] == 0]
want = {("F", 0): 5 * 2048, ("F", 1): 4 * 2048 + 64 + 128, ("BW", 1): 5 * 2048, ("BW", 0): 4 * 2048}
seen = collections.Counter()
for e in events:
    op, stage = e["args"].get("op", e["name"].split()[0]), e["args"].get("stage")
    key = (e["name"].split()[0], e["args"]["stage"]) if "stage" in e["args"] else None
    if key in want:
        assert e["args"].get("tp_comm_bytes") == want[key], (e["name"], e["args"], want[key])
        assert 0 <= e["args"]["tp_comm_us"] <= e["dur"], e
        seen[key] += 1
    elif e["name"].split()[0] in ("SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT", "PROBE"):
        assert "tp_comm_bytes" not in e["args"], e
    if e["name"].split()[0] in ("REDUCE_GRAD", "OPT"):  # ZeRO's reduce-scatter, and its all-gather
        assert e["args"].get("dp_comm_bytes", 0) > 0, e
        seen[e["name"].split()[0]] += 1
assert set(seen) == set(want) | {"REDUCE_GRAD", "OPT"} and min(seen.values()) >= 8, seen
print(f"trace: {sum(seen.values())} compute actions with their tensor-parallel bytes as the closed form")
PY

# /metrics: each of the 8 ranks its own series, tp labelled (2 pipeline ranks x 2 replicas x 2).
curl -sf "http://$HTTP/metrics" > "$WORK/metrics.txt" || fail "GET /metrics"
grep "^pipecoord_memory_peak_bytes{.*job_id=\"$job\"" "$WORK/metrics.txt" > "$WORK/peaks.txt" || fail "no peak series"
[ "$(wc -l < "$WORK/peaks.txt")" = 8 ] || fail "8 peak series expected: $(cat "$WORK/peaks.txt")"
[ "$(grep -c 'tp="[01]"' "$WORK/peaks.txt")" = 8 ] || fail "tp labels: $(cat "$WORK/peaks.txt")"

job_json "$WORK/one.json" tp=1 pp=2 dp=2 microbatches=4 model.layers=4 model.ffnHidden=64 steps=4 "$OPT"
job1=$("$PIPECTL" submit "$WORK/one.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job1" > /dev/null || fail "the tp 1 job did not succeed"
"$PIPECTL" status "$job1" --format json > "$WORK/one-status.json"
/usr/bin/python3 - "$WORK/tp-status.json" "$WORK/one-status.json" "$WORK/metrics.txt" <<'PY' || fail "losses"
import json, math, re, sys
tp, one = (json.load(open(p)) for p in sys.argv[1:3])
a = [s["loss"] for s in tp["steps"]]
b = [s["loss"] for s in one["steps"]]
assert len(a) == len(b) == 4, (a, b)
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"tp 2 x pp 2 x dp 2 against tp 1: losses {a} vs {b}, worst relative difference {worst:.3g}")
assert worst <= 1e-5, worst
# The global gradient norm (over tp, pp and the ZeRO shards) and learning rate of every step: the
# same at tp 1 without ZeRO; the rates the schedule's closed form (warmup 1, then cosine from 0.01
# to 0.001 over the 3 steps left); clipped (0.5) where the norm was above it.
n_tp = [s["gradNorm"] for s in tp["steps"]]
n_one = [s["gradNorm"] for s in one["steps"]]
assert max(abs(x - y) / y for x, y in zip(n_tp, n_one)) <= 1e-5, (n_tp, n_one)
want_lr = [0.01] + [0.001 + 0.009 * (1 + math.cos(math.pi * k / 3)) / 2 for k in range(3)]
for s, w in zip(tp["steps"], want_lr):
    assert abs(s["learningRate"] - w) <= 1e-15, (s["learningRate"], w)
metric = float(re.search(r'^pipecoord_grad_norm\{job_id="%s"\} (\S+)$' % tp["id"], open(sys.argv[3]).read(), re.M).group(1))
assert abs(metric - n_tp[-1]) <= 1e-9 * n_tp[-1], (metric, n_tp)
print(f"grad norms {n_tp}, learning rates {[s['learningRate'] for s in tp['steps']]}")
assert len(tp["workerIds"]) == 8 and len(set(tp["workerIds"])) == 8, tp["workerIds"]
# Every rank's measured peak is its pipeline rank's budget (global rank g = (dp * pp + r) * tp + t).
budget = [int(b) for b in tp["plan"]["memoryBudgetBytes"]]
for s in tp["steps"]:
    peaks = [int(b) for b in s["peakMemoryBytes"]]
    assert peaks == [budget[(g // 2) % 2] for g in range(8)], (peaks, budget)
PY

# Sequence parallelism with full recompute and ZeRO-2 over the same 8 processes: token shards
# cross the pipeline between worker processes; losses equal the tp 1 job's, every peak its budget.
# Its workers send steps 0, 1 and 3 whole and step 2 folded by kind, and each tp group's timings
# come from its rank 0 (health.detailEvery, tpSpeaker: docs/monitoring.md, "Telemetry detail").
DETAIL='health={"warmupSteps":1,"calibrationSteps":1,"detailEvery":3,"tpSpeaker":"on"}'
job_json "$WORK/sp.json" tp=2 pp=2 dp=2 zero=2 sequenceParallel=true recompute='"full"' microbatches=4 \
  model.layers=4 model.ffnHidden=64 steps=4 "$OPT" "$DETAIL"
job_sp=$("$PIPECTL" submit "$WORK/sp.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job_sp" > /dev/null || fail "the sp job did not succeed"
"$PIPECTL" status "$job_sp" > "$WORK/sp-status.txt"
grep -q "submitted: 1f1b, pp 2, dp 2, tp 2+sp, zero 2, recompute full, waiting for 8 worker(s)" "$WORK/sp-status.txt" ||
  fail "pipectl status does not show sp, zero 2 and recompute: $(head -12 "$WORK/sp-status.txt")"
"$PIPECTL" status "$job_sp" --format json > "$WORK/sp-status.json"
/usr/bin/python3 - "$WORK/sp-status.json" "$WORK/one-status.json" <<'PY' || fail "sp losses"
import json, sys
sp, one = (json.load(open(p)) for p in sys.argv[1:3])
a, b = [s["loss"] for s in sp["steps"]], [s["loss"] for s in one["steps"]]
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"tp 2 + sp, zero 2, full recompute against tp 1: worst relative loss difference {worst:.3g}")
assert len(a) == 4 and worst <= 1e-5, (a, b)
budget = [int(x) for x in sp["plan"]["memoryBudgetBytes"]]
for s in sp["steps"]:
    assert [int(x) for x in s["peakMemoryBytes"]] == [budget[(g // 2) % 2] for g in range(8)], (s, budget)
    assert float(s["stepTimeS"]) > 0 and 0 < float(s["measuredBubbleRate"]) < 1, s  # folded step 2 too
PY
# The trace holds the whole steps, every action of them, from each tp group's rank 0 only.
"$PIPECTL" trace "$job_sp" --out "$WORK/sp-trace.json" > /dev/null || fail "pipectl trace of the sp job"
/usr/bin/python3 - "$WORK/sp-trace.json" "$WORK/sp-status.json" <<'PY' || fail "sp trace: telemetry detail"
import collections, json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["pid"] == 0]
plan = json.load(open(sys.argv[2]))["plan"]
per_rank = collections.Counter((e["tid"] % 8, e["args"]["step"]) for e in events)
steps = sorted({s for _, s in per_rank})
assert steps == [0, 1, 3], steps
assert {g for g, _ in per_rank} == {0, 2, 4, 6}, per_rank  # tp rank 0 of each group
for (g, step), n in per_rank.items():
    assert n == len(plan["ranks"][(g // 2) % 2]["actions"]), (g, step, n)
print(f"sp trace: steps {steps} whole from ranks 0, 2, 4, 6; step 2 folded")
PY

echo "e2e tensor parallel: ok"
