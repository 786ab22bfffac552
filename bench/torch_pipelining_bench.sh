#!/usr/bin/env bash
# bazel run -c opt //bench:torch_pipelining_bench [-- --pp N --steps N --hidden N --layers N]
#
# pipecoord's PyTorch workers against PyTorch's own pipelining runtime (torch.distributed.pipelining
# 2.11 over gloo, tests/torch_pipelining/peer_run.py) on the same model, data and batch split, in
# one run: for each pair of schedules (fthenb / ScheduleGPipe, 1f1b / Schedule1F1B, interleaved /
# ScheduleInterleaved1F1B, zbh1 / ScheduleInterleavedZeroBubble, zbv / ScheduleZBVZeroBubble,
# dualpipev / ScheduleDualPipeV), each system's median step time over the steps after the first,
# its measured bubble (1 - compute time / (ranks x step time)) and its peak memory per rank
# (parameters, gradients, AdamW state and the tensors autograd holds saved); the ratio is
# PyTorch's step time / ours (> 1: ours is faster). Losses are checked equal (1e-5) on the way.
# One worker process per rank on this machine's cores: with more ranks than cores both systems
# share them alike.
set -euo pipefail
cd "${RUNFILES_DIR:-$0.runfiles}/pipecoord"
pp=2 steps=12 hidden=128 layers=8
while [ $# -gt 0 ]; do
  case $1 in
    --pp) pp=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "torch_pipelining_bench: unknown flag $1 (--pp, --steps, --hidden, --layers)" >&2; exit 2 ;;
  esac
done
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:$PWD/python"
start_coordinator
start_torch_workers "$pp"
echo "pp $pp, $layers layers, h $hidden, 8 micro-batches of 2 x 64 tokens, $steps steps; PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
printf '%-12s %-30s %10s %10s %6s %14s  %s\n' ours PyTorch "ours ms" "PyTorch ms" ratio "bubble o/P" "peak MiB per rank, ours / PyTorch"
for pair in fthenb:gpipe 1f1b:1f1b interleaved:interleaved zbh1:zb-interleaved zbv:zbv dualpipev:dualpipev; do
  ours=${pair%%:*} theirs=${pair##*:}
  job_json "$WORK/job.json" pp="$pp" "schedule=\"$ours\"" microbatches=8 steps="$steps" learningRate=0.003 \
    "model={\"layers\": $layers, \"hidden\": $hidden, \"heads\": 4, \"vocab\": 256, \"seqLen\": 64, \"seed\": \"11\"}" \
    'worker={"kind": "torch", "module": "reference_stages:build_stage"}'
  job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
  timeout 600 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "$ours: $(tail -3 "$WORK/watch.out")"
  "$PIPECTL" status "$job" --format json > "$WORK/status.json"
  timeout 600 "$PYTHON" tests/torch_pipelining/peer_run.py "$WORK/job.json" "$theirs" "$WORK/peer.json" \
    > "$WORK/peer.log" 2>&1 || fail "PyTorch's $theirs: $(tail -5 "$WORK/peer.log")"
  "$PYTHON" - "$WORK/status.json" "$WORK/peer.json" "$ours" <<'PY'
import json, statistics, sys
job, peer, ours = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
a, b = [s["loss"] for s in job["steps"]], peer["losses"]
assert max(abs(x - y) / abs(y) for x, y in zip(a, b)) <= 1e-5, (a, b)
steps = job["steps"][1:]
t_ours = statistics.median(s["stepTimeS"] for s in steps)
t_theirs = statistics.median(peer["step_s"][1:])
b_ours = statistics.median(s.get("measuredBubbleRate", 0) for s in steps)
b_theirs = statistics.median(peer["bubble"][1:])
peaks = [max(int(x) for x in col) for col in zip(*[s["peakMemoryBytes"] for s in job["steps"]])]
print("%-12s %-30s %10.1f %10.1f %5.2fx %6.2f / %5.2f  %s / %s" % (
    ours, peer["schedule"], t_ours * 1e3, t_theirs * 1e3, t_theirs / t_ours, b_ours, b_theirs,
    " ".join("%.1f" % (p / 2**20) for p in peaks), " ".join("%.1f" % (p / 2**20) for p in peer["peak_bytes"])))
PY
done
