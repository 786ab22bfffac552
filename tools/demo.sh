#!/usr/bin/env bash
# The local demo: a coordinator and four CPU workers on loopback, the default job
# (examples/text_job.json: a tiny Llama-style model, pp 4, zbh1, 8 micro-batches, 60 steps,
# trained on English text byte by byte, with validation loss and bits per byte against the
# text's unigram entropy; or examples/job.json: the same pipeline on synthetic tokens), live
# progress, a summary (the calibrated predictions beside the measured step time and bubble rate,
# and where the idle time went), the rebalance proposal, and the run's Perfetto trace in
# run-trace.json. Stops what it starts. --inject passes a fault to the workers (worker --inject,
# docs/monitoring.md), e.g. --inject slow:1:2 (rank 1 computes 2x slower) to see the straggler
# check name it.
#   tools/demo.sh [--inject RULE[,RULE...]] [JOB.json]
set -euo pipefail
cd "$(dirname "$0")/.."
inject=()
if [ "${1:-}" = --inject ]; then
  inject=(--inject "${2:?--inject needs a rule, e.g. slow:1:2}")
  shift 2
fi
job_file=${1:-examples/text_job.json}
workers=$(/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s.get("pp",1)*max(1,s.get("dp",1)))' "$job_file")

bazel build //coordinator //worker/daemon:worker //cli:pipectl 2>&1 | grep -E "^(ERROR|FAILED)" && exit 1
bin=$(bazel info bazel-bin 2>/dev/null)  # not the bazel-bin symlink: another config may own it
logs=$(mktemp -d)
# The processes come from the local launcher, with the configuration the Kubernetes pods get
# (deploy/base/pipecoord.env); stopping it stops them.
deploy/local/launch.sh --workers "$workers" --bin "$bin" --logs "$logs" "${inject[@]}" > "$logs/launch.log" 2>&1 &
launcher=$!
cleanup() { kill "$launcher" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do grep -qs "ready$" "$logs/launch.log" && break; kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
addr=$(sed -n 's/^launch: coordinator at \([^ ]*\).*/\1/p' "$logs/launch.log")
grep -q "ready$" "$logs/launch.log" || { cat "$logs/launch.log"; exit 1; }
export PIPECOORD_ADDR=$addr
# The launcher serves gRPC over TLS with a throwaway CA and token, as the pods do.
PIPECOORD_TLS_CA=$(sed -n 's/^launch: pipectl: PIPECOORD_TLS_CA=\([^ ]*\) .*/\1/p' "$logs/launch.log")
PIPECOORD_TOKEN=$(cat "$(dirname "$PIPECOORD_TLS_CA")/token")
export PIPECOORD_TLS_CA PIPECOORD_TOKEN
echo "demo: coordinator at $addr, starting $workers worker(s) (logs in $logs)"

# A job with spec.data trains on text: its folder is prepared byte by byte (vocabulary 256) from
# the English text of Debian's fortunes package (tools/setup.sh installs it), and the unigram
# entropy of that text is the mark to beat: the loss of the best model that ignores context.
data_dir=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("data", {}).get("path", ""))' "$job_file")
if [ -n "$data_dir" ]; then
  mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort)
  [ ${#texts[@]} -gt 0 ] || { echo "demo: no text in /usr/share/games/fortunes: run tools/setup.sh (Debian's fortunes)"; exit 1; }
  "$bin/cli/pipectl" data prepare "${texts[@]}" --out "$data_dir"
  entropy=$("$bin/cli/pipectl" data check "$data_dir/train" --entropy --format json |
            /usr/bin/python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)[0]["unigram_entropy_bits"])')
  echo "demo: unigram entropy of the training text: $entropy bits per byte"
fi

job=$("$bin/cli/pipectl" submit "$job_file" --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["jobId"])')
rc=0
"$bin/cli/pipectl" watch "$job" || rc=$?
echo
"$bin/cli/pipectl" status "$job"
echo
"$bin/cli/pipectl" rebalance "$job" || true  # exit 1 only when the job never got calibrated
"$bin/cli/pipectl" trace "$job" --out run-trace.json
if [ -n "$data_dir" ]; then
  # The last step's training loss and the last validation loss in bits per byte (loss / ln 2).
  "$bin/cli/pipectl" status "$job" --format json | /usr/bin/python3 -c '
import json, math, sys
steps, h = json.load(sys.stdin).get("steps", []), float(sys.argv[1])
val = [s for s in steps if s.get("hasValLoss")]
if not steps or not val: sys.exit("demo: no training or validation loss measured")
t, v = steps[-1].get("loss", 0) / math.log(2), val[-1].get("valLoss", 0) / math.log(2)
print("demo: bits per byte at step %d: training %.3f, validation %.3f; unigram entropy of the text %.3f: %s" % (
    steps[-1]["step"], t, v, h, "both below it" if max(t, v) < h else "NOT below it"))' "$entropy" || rc=1
fi
exit $rc
