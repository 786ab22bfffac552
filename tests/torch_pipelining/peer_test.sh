#!/usr/bin/env bash
# pipecoord's PyTorch workers against PyTorch's own pipelining runtime (torch.distributed.pipelining,
# tests/torch_pipelining/peer_run.py) on the same model, data and batch split: for pp 2 and 4 and
# each pair of schedules (ours -> PyTorch's: fthenb -> ScheduleGPipe, 1f1b -> Schedule1F1B,
# interleaved -> ScheduleInterleaved1F1B, zbh1 -> ScheduleInterleavedZeroBubble (PyTorch has no
# one-stage-per-rank zero-bubble schedule), zbv -> ScheduleZBVZeroBubble, dualpipev ->
# ScheduleDualPipeV), a pipecoord job on torch workers under a real coordinator and the peer run
# over gloo give every step's loss within 1e-5 relative of each other. Each pair's step time
# (median) and peak memory per rank are printed side by side (not asserted: a benchmark's job).
# Then the two agree on what a schedule is: our CSV export (`pipectl schedule --format csv`, with
# sends and receives) of 1f1b, zbh1, interleaved, zbv and dualpipev runs on PyTorch's
# _PipelineScheduleRuntime, and PyTorch's own multi-stage schedules (_dump_csv) run as pipecoord
# jobs (`schedule: csv`) on the torch workers, each with the same losses (1e-5).
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:$PWD/python"

start_coordinator
start_torch_workers 4

for pp in 2 4; do
  for pair in fthenb:gpipe 1f1b:1f1b interleaved:interleaved zbh1:zb-interleaved zbv:zbv dualpipev:dualpipev; do
    ours=${pair%%:*} theirs=${pair##*:}
    job_json "$WORK/job.json" pp=$pp "schedule=\"$ours\"" microbatches=8 steps=6 learningRate=0.01 \
      'model={"layers": 8, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "11"}' \
      'worker={"kind": "torch", "module": "reference_stages:build_stage"}'
    job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
    timeout 180 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "pp $pp $ours: $(tail -3 "$WORK/watch.out")"
    "$PIPECTL" status "$job" --format json > "$WORK/status.json"
    cp "$WORK/status.json" "$WORK/status-$pp-$ours.json"
    timeout 300 "$PYTHON" tests/torch_pipelining/peer_run.py "$WORK/job.json" "$theirs" "$WORK/peer.json" \
      > "$WORK/peer.log" 2>&1 || fail "PyTorch's $theirs at pp $pp: $(tail -5 "$WORK/peer.log")"
    "$PYTHON" - "$WORK/status.json" "$WORK/peer.json" "pp $pp $ours" <<'PY' || fail "pp $pp $ours vs $theirs: losses differ"
import json, statistics, sys
job, peer, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
ours = [s["loss"] for s in job["steps"]]
theirs = peer["losses"]
assert len(ours) == len(theirs) == 6, (ours, theirs)
worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
assert worst <= 1e-5, (ours, theirs)
assert theirs[-1] < theirs[0], theirs  # it learns
# Steps after the first (PyTorch's first step infers shapes; ours connects): medians.
our_t = statistics.median(s["stepTimeS"] for s in job["steps"][1:])
their_t = statistics.median(peer["step_s"][1:])
peaks = [max(p) for p in zip(*[s.get("peakMemoryBytes", []) for s in job["steps"]])] if job["steps"] else []
bubble = statistics.median(s.get("measuredBubbleRate", 0) for s in job["steps"][1:])
print(f"{name} vs {peer['schedule']}: losses equal within {worst:.1e}; step {our_t*1e3:.1f} ms (bubble "
      f"{bubble:.2f}) vs {their_t*1e3:.1f} ms; peak per rank MiB ours "
      f"{' '.join('%.2f' % (int(p) / 2**20) for p in peaks)} / PyTorch {' '.join('%.2f' % (p / 2**20) for p in peer['peak_bytes'])}")
PY
  done
done

# same_losses A B NAME: two runs' losses (a job's status JSON or peer_run's output) within 1e-5.
same_losses() {
  "$PYTHON" - "$1" "$2" "$3" <<'PY' || fail "$3: losses differ"
import json, sys
def losses(path):
    d = json.load(open(path))
    if "losses" in d:
        return d["losses"]
    assert d["state"] == "SUCCEEDED", d.get("failureCause")
    return [s["loss"] for s in d["steps"]]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 6, (a, b)
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
assert worst <= 1e-5, (a, b)
print(f"{sys.argv[3]}: losses equal within {worst:.1e}")
PY
}

# Ours on PyTorch's runtime (the model, data and batch split of the pp 2 jobs above).
job_json "$WORK/job.json" pp=2 microbatches=8 steps=6 learningRate=0.01 \
  'model={"layers": 8, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "11"}' \
  'worker={"kind": "torch", "module": "reference_stages:build_stage"}'
for sched in 1f1b zbh1 interleaved zbv dualpipev; do
  "$PIPECTL" schedule --schedule "$sched" --pp 2 --microbatches 8 --format csv --out "$WORK/ours.csv" > /dev/null ||
    fail "pipectl schedule $sched --format csv"
  timeout 300 "$PYTHON" tests/torch_pipelining/peer_run.py "$WORK/job.json" csv "$WORK/loaded.json" --load-csv "$WORK/ours.csv" \
    > "$WORK/peer.log" 2>&1 || fail "our $sched CSV on PyTorch's runtime: $(tail -5 "$WORK/peer.log")"
  same_losses "$WORK/loaded.json" "$WORK/status-2-$sched.json" "our $sched (pp 2) run by PyTorch's _PipelineScheduleRuntime vs by pipecoord"
done

# PyTorch's schedules as pipecoord jobs.
for sched in interleaved zb-interleaved zbv dualpipev; do
  job_json "$WORK/job.json" pp=2 microbatches=8 steps=6 learningRate=0.01 \
    'model={"layers": 8, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "11"}' \
    'worker={"kind": "torch", "module": "reference_stages:build_stage"}'
  timeout 300 "$PYTHON" tests/torch_pipelining/peer_run.py "$WORK/job.json" "$sched" "$WORK/theirs.json" \
    --dump-csv "$WORK/theirs.csv" > "$WORK/peer.log" 2>&1 || fail "PyTorch's $sched: $(tail -5 "$WORK/peer.log")"
  "$PIPECTL" schedule --schedule csv --csv "$WORK/theirs.csv" > /dev/null || fail "PyTorch's $sched CSV does not import"
  "$PYTHON" - "$WORK/job.json" "$WORK/theirs.csv" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec.update(schedule="csv", csvSchedule=open(sys.argv[2]).read(), vpp=2)  # each of them: 2 stages per rank
json.dump(spec, open(sys.argv[1], "w"))
PY
  job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
  timeout 180 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "PyTorch's $sched as a pipecoord job: $(tail -3 "$WORK/watch.out")"
  "$PIPECTL" status "$job" --format json > "$WORK/status.json"
  same_losses "$WORK/status.json" "$WORK/theirs.json" "PyTorch's $(json_field '["schedule"]' < "$WORK/theirs.json") run by pipecoord vs by PyTorch"
done
echo "torch pipelining peer: ok"
