#!/usr/bin/env bash
# A lost rank taken over in place (docs/operations.md, "a lost rank"): a worker of a pp x dp 2 job
# SIGKILLed mid-job while a free worker waits. The job SUCCEEDS with no restart counted and one
# recovery, every step's loss equal to an uninterrupted run's of the same job bit for bit (the
# same workers, run first), no checkpoint read; the time from the kill to the recovery's end is
# printed (also for a tp 2 x pp 2 x dp 2 job, whose lost tensor-parallel rank's group is formed
# again with the spare). Then the same with no free worker: the job goes on with one replica fewer at the same
# global batch (dp 1, twice the micro-batches), losses within 1e-6 relative of the uninterrupted
# run's, no restart counted; and once more with a worker returning after the shrink: the job grows
# back to dp 2 (its state streamed to the new replica), the same bound.
source tests/lib.sh
source tests/health_lib.sh

# losses JOB: the job's step losses as JSON (repr of each float: compared bit for bit).
losses() {
  "$PIPECTL" status "$1" --format json | /usr/bin/python3 -c '
import json, sys
steps = json.load(sys.stdin).get("steps", [])
print(json.dumps({s.get("step", 0): repr(float(s.get("loss", 0))) for s in steps}, sort_keys=True))'
}

# scenario NAME PP SCHEDULE SPARES [GROW] [TP]: a job of tp x pp x dp 2 on 2 pp tp workers (+ SPARES
# free ones); the worker of global rank 2 pp tp - 1 (the last stage of replica 1, its last tensor-
# parallel rank) SIGKILLed after step 10.
scenario() {
  local name=$1 pp=$2 schedule=$3 spares=$4 grow=${5:-0} tp=${6:-1}
  start_coordinator --lease-ms 2000
  start_workers_with $((2 * pp * tp + spares)) --checkpoint-dir "$WORK/checkpoints"
  job_json "$WORK/$name.json" pp="$pp" dp=2 tp="$tp" schedule="\"$schedule\"" steps=300 "model.layers=$((2 * pp))" \
    maxRestarts=1 checkpointEvery=50
  local base job
  base=$(submit "$WORK/$name.json")
  [ "$(wait_state "$base" 120)" = SUCCEEDED ] || fail "$name: the uninterrupted run did not succeed"
  losses "$base" > "$WORK/$name-base.json"
  job=$(submit "$WORK/$name.json")
  wait_steps "$job" 10
  local victim_id
  victim_id=$("$PIPECTL" status "$job" --format json | json_field "['workerIds'][$((2 * pp * tp - 1))]")
  worker_process "$victim_id"
  local killed_ms
  killed_ms=$(date +%s%3N)
  kill -9 "$WORKER_PID"
  local recovered_ms=""
  for _ in $(seq 600); do
    if "$PIPECTL" status "$job" --format json | grep -q '"recovered '; then recovered_ms=$(date +%s%3N); break; fi
    sleep 0.02
  done
  if [ "$grow" = 1 ]; then
    # A worker returns: with the let-go one, a replica's worth: the job grows back to dp 2.
    start_workers_with 1 --checkpoint-dir "$WORK/checkpoints"
    for _ in $(seq 600); do
      "$PIPECTL" status "$job" --format json | grep -q '"grew back to dp 2' && break
      sleep 0.02
    done
  fi
  [ "$(wait_state "$job" 120)" = SUCCEEDED ] || fail "$name: the job did not succeed: $("$PIPECTL" status "$job" --format json |
    /usr/bin/python3 -c 'import json,sys; [print(e.get("message")) for e in json.load(sys.stdin)["events"]]')"
  "$PIPECTL" status "$job" --format json > "$WORK/$name-status.json"
  losses "$job" > "$WORK/$name-run.json"
  /usr/bin/python3 - "$WORK/$name-status.json" "$WORK/$name-base.json" "$WORK/$name-run.json" "$spares" "$victim_id" "$grow" <<'PY' ||
import json, sys
status = json.load(open(sys.argv[1]))
base, run = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
spares, victim, grow = int(sys.argv[4]), sys.argv[5], sys.argv[6] == "1"
events = [e.get("message", "") for e in status.get("events", [])]
assert len(run) == 300, f"{len(run)} steps recorded, not 300"
assert status.get("restarts", 0) == 0, f"restarts: {status.get('restarts')}"
assert status.get("recoveries", 0) == 1, f"recoveries: {status.get('recoveries')}"
assert victim not in status.get("workerIds", []), "the lost worker still holds a rank"
assert not any("restarting" in m for m in events), events
if spares:
    # Bit for bit: the same replicas, the same additions.
    diff = [k for k in base if base[k] != run.get(k)]
    recs = [(r.get("step", 0), r.get("loss")) for r in status.get("steps", []) if str(r.get("step", 0)) in diff]
    assert not diff, (f"losses differ at steps {diff[:5]}: {[(base[k], run.get(k)) for k in diff[:3]]}; records {recs}; "
                      f"events {[m for m in events if not m.startswith('calibrated')]}")
    assert any(m.startswith("recovered ") and "no checkpoint read" in m for m in events), events[-6:]
else:
    # One replica fewer: the same samples per step, the gradient's additions in another order.
    rel = {int(k): abs(float(run[k]) - float(base[k])) / abs(float(base[k])) for k in base}
    worst = max(rel.values())
    print(f"shrink: largest relative loss difference over 300 steps {worst:.2e}")
    assert worst <= 1e-6, (f"losses differ by {worst:.2e} relative, first at step "
                           f"{min(k for k, v in rel.items() if v > 1e-6)}; events "
                           f"{[m for m in events if not m.startswith('calibrated')]}")
    assert any(m.startswith("recovered from the loss of ") and "by going on with dp 1" in m for m in events), events[-6:]
    if grow:
        assert status["spec"]["dp"] == 2 and status["spec"]["microbatches"] == 4, status["spec"]
        assert any(m.startswith("grew back to dp 2 in ") for m in events), events[-6:]
    else:
        assert status["spec"]["dp"] == 1 and status["spec"]["microbatches"] == 8, status["spec"]
PY
    fail "$name: $(tail -5 "$WORK/$name-status.json")"
  # Through a file: grep -q quits at its match, and pipefail would count pipectl's SIGPIPE then.
  "$PIPECTL" status "$job" > "$WORK/$name-status.txt"
  grep -q "^recovered 1 lost rank(s) in place" "$WORK/$name-status.txt" || fail "$name: pipectl status does not say it recovered"
  if [ -n "$recovered_ms" ]; then
    echo "$name: kill -> recovered event seen after $((recovered_ms - killed_ms)) ms"
  fi
  grep -h '"recovered \|no spare' "$WORK/$name-status.json" | head -2 || true
  "$PIPECTL" status "$job" --format json | /usr/bin/python3 -c '
import json, sys
for e in json.load(sys.stdin)["events"]:
    m = e.get("message", "")
    if m.startswith(("lost ", "every rank", "recovered ", "not recovering", "worker(s) ", "grew ")): print("  event:", m)'
  stop_all
}

for s in ${SCENARIOS:-pp2-1f1b pp4-zbh1 pp2-shrink pp2-shrink-grow tp2-pp2-zbh1 tp2-shrink-grow}; do
  case "$s" in
    pp2-1f1b) scenario pp2-1f1b 2 1f1b 1 ;;
    tp2-pp2-zbh1) scenario tp2-pp2-zbh1 2 zbh1 1 0 2 ;;
    tp2-shrink-grow) scenario tp2-shrink-grow 2 1f1b 0 1 2 ;;
    pp4-zbh1) scenario pp4-zbh1 4 zbh1 1 ;;
    pp2-shrink) scenario pp2-shrink 2 1f1b 0 ;;
    pp2-shrink-grow) scenario pp2-shrink-grow 2 1f1b 0 1 ;;
  esac
done
echo "e2e spare recovery: ok"
