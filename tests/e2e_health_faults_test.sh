#!/usr/bin/env bash
# The fault matrix, every check at its DEFAULT thresholds (no `health` in any job), under the
# demo's load: the demo's job (examples/job.json: pp 4, zbh1, 8 micro-batches of 4, a tiny
# Llama-style model) on four worker processes sharing this machine's cores, real gRPC on
# loopback. Each scenario starts its own coordinator and workers, injects one fault (worker
# --inject) and checks that the right check names the right rank in time, and that nothing else
# raised an event (a false alarm):
#   slow 2x on rank 1 from step 8            STRAGGLER rank 1 within 5 steps (event step <= 12)
#   slow 1.5x from step 8                    STRAGGLER rank 1 within 8 steps (the individual score
#                                            or the change-point rule)
#   slow 2x on rank 1 from the start         STRAGGLER rank 1 at the first scored step (4) + 1 or 2
#   hang of rank 1 at step 6                 HANG rank 1 step 6, within deadline + 1 s of the
#                                            rank's last progress (its log), end to end
#   corrupt GEMM of rank 2 from step 5       SDC rank 2 step 5; the losses leave the clean run's
#   flip: one bit of rank 1's F at step 5    SDC by the replay probe when that F is the one it
#                                            re-runs; none when its input was gone at the PROBE
#   oom: rank 3 holds 64 MiB more from step 6   MEMORY rank 3 step 6
#   slowlink: rank 1's sends 80 ms late      BUBBLE on a neighbour naming rank 1 within 5 steps;
#                                            comm idle, the idle split's cause a link from rank 1
#   SIGKILL of the worker holding rank 2     the job FAILED naming rank 2 within lease + 1 s
# and the clean runs: 5 jobs x 40 steps and one of 200 steps, zero health events. Everything at
# the coordinator's default lease too (5 s: heartbeats every 1.67 s, ticks every 200 ms).
# Prints one line per scenario with its detection latency and false alarm count.
source tests/lib.sh
source tests/health_lib.sh

LEASE_MS=5000  # the coordinator's default --lease-ms, not passed (docs/monitoring.md)

# demo_job FILE STEPS: the demo's job with STEPS steps.
demo_job() {
  job_json "$1" steps="$2" schedule='"zbh1"' pp=4 microbatches=8 microBatchSize=4 learningRate=0.003 \
    'model={"layers": 8, "hidden": 64, "heads": 4, "vocab": 128, "seqLen": 32, "seed": "7"}' "${@:3}"
}

# events JOB: the job's health events, one JSON object a line.
events() {
  "$PIPECTL" events "$1" --kind health --format json |
    /usr/bin/python3 -c 'import json, sys; [print(json.dumps(e)) for e in json.load(sys.stdin).get("events", [])]'
}

# first_event JOB KIND: the job's first event of KIND as JSON, or nothing.
first_event() {
  "$PIPECTL" events "$1" --kind "$2" --format json |
    /usr/bin/python3 -c 'import json, sys; e = json.load(sys.stdin).get("events", []); print(json.dumps(e[0]) if e else "")'
}

# field JSON NAME: one field of an event (protobuf's JSON leaves out zeros: missing is 0).
field() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], 0))" "$1" "$2"; }

# false_alarms JOB KIND RANK: the job's health events other than those of KIND naming RANK (a
# BUBBLE naming RANK as the peer its neighbour waited for is a detection too, not a false alarm).
false_alarms() {
  events "$1" | /usr/bin/python3 -c '
import json, re, sys
# A BUBBLE detects RANK when it waited for it or when the root of its wait chain is RANK or its link.
def names_rank(m, r):
    return bool(re.search(r"waited [0-9.]+ s for rank %d \(dp 0\)($|;)" % r, m)) or \
        m.endswith("root of the wait chain: rank %d (dp 0)" % r) or "root of the wait chain: the link from rank %d (dp 0)" % r in m
kind, rank = sys.argv[1], int(sys.argv[2])
n = 0
for line in sys.stdin:
    e = json.loads(line)
    mine = e["kind"] == kind and e.get("rank", 0) == rank
    waited = e["kind"] == "BUBBLE" and names_rank(e["message"], rank)
    if not (mine or waited):
        n += 1
        print("false alarm: " + e["message"], file=sys.stderr)
print(n)' "$2" "$3"
}

scenario() {  # scenario [worker flags...]: a fresh coordinator and four workers
  start_coordinator
  start_workers_with 4 "$@"
}

# report LINE: one line of the closing summary (a file: scenarios run in subshells).
SUMMARY="$WORK/summary.txt"
: > "$SUMMARY"
report() { echo "$*" >> "$SUMMARY"; echo "$*"; }

# attempt NAME FN [ARGS...]: runs one scenario (FN ARGS: fresh processes, its own checks) up to
# TRIES times, until one run passes every check. Why: four worker processes share two cores with
# the coordinator here, and a process can run every action 1.5x slower than its best for several
# steps. On 2026-11-30 (the CPU backend's GEMMs then still on OpenBLAS's slow generic kernels,
# linear.cc) 9 of 11 runs of this file failed, each on one scenario, a different one (a 2x
# slowdown seen at the fault's 8th step, a false STRAGGLER in "corrupt" or "clean", ...); with
# the fast kernels, 3 runs: one scenario's first try failed in 2 of them. A check that misses its
# fault, or that raises events on a clean run, fails every try; the summary says which scenarios
# needed more than one.
TRIES=3
attempt() {
  local name=$1 rc t
  shift
  for t in $(seq "$TRIES"); do
    set +e
    ( set -e; trap stop_all EXIT; "$@" )
    rc=$?
    set -e
    if [ "$rc" = 0 ]; then
      [ "$t" = 1 ] || report "  ($name passed at try $t of $TRIES; the tries before failed, above)"
      return 0
    fi
    echo "--- $name: try $t of $TRIES failed" >&2
  done
  fail "$name: failed $TRIES tries in a row"
}

# --- slow: rank 1's compute takes FACTOR x as long from step FROM ---------------------------------
slow() {
  local factor=$1 from=$2 within=$3 score=$4
  scenario --inject "slow:1:$factor:$from"
  # The known-answer probe only: the replay's extra F on ranks 0 and 1, four ranks sharing two
  # cores, is noise the 1.3x case's margin did not absorb in one fresh-clone run (no STRAGGLER in
  # 28 steps); the fault matrix bench measures detection with every default on.
  demo_job "$WORK/slow.json" $((from + within + 3)) 'health={"replayOff": true}'

  local job
  job=$(submit "$WORK/slow.json")
  "$PIPECTL" watch "$job" > /dev/null || fail "slow $factor job did not succeed"
  local e
  e=$(first_event "$job" STRAGGLER)
  [ -n "$e" ] || fail "slow $factor from step $from: no STRAGGLER event: $(events "$job")"
  [ "$(field "$e" rank)" = 1 ] || fail "slow $factor: the straggler event names the wrong rank: $e"
  local step
  step=$(field "$e" step)
  [ "$step" -ge "$from" ] && [ "$step" -lt $((from + within)) ] ||
    fail "slow $factor from step $from: detected at step $step, not within $within steps"
  local msg
  msg=$(field "$e" message)
  local want="^straggler: rank 1 \(dp 0\) at step $step: slower than [a-z ]+ in every kind of action in [23] of the last 3 steps[a-z ,]*: $score score 0\.[0-9]+ < 0\.7 \(fastest action per cost unit"
  # A small slowdown: the change-point rule or the individual score, whichever sees it first.
  [ "$score" = change ] && want="^straggler: rank 1 \(dp 0\) at step $step: slower than its own baseline in every kind of action (since step [0-9]+ while the other ranks are not: a lasting change \(cumulative log-slowdown [0-9.]+ > 0\.80|in [23] of the last 3 steps while the other ranks are not: individual score)"
  [[ "$msg" =~ $want ]] ||
    fail "slow $factor from step $from: straggler text (a $score score expected): $msg"
  local fa
  fa=$(false_alarms "$job" STRAGGLER 1)
  [ "$fa" = 0 ] || fail "slow $factor: $fa false alarm(s)"
  report "slow:1:$factor:$from: STRAGGLER rank 1 at step $step (the fault's step $((step - from + 1))), $fa false alarms: $msg"
  stop_all
}
# Slowed after the baseline: slower than its own baseline while its peers are not.
attempt "slow 2x from step 8" slow 2 8 5 individual
# 1.5x scores 0.667, just under the threshold: a noisy step delays the score's verdict, and the
# change-point rule then finds it by the fault's 6th step (three capped steps after the window
# filled). 1.3x (scores 0.77, above the threshold: the change-point rule's alone) is not asserted
# here: with four processes on two cores it sits at this machine's noise floor (2026-11-30, with
# OpenBLAS on its AVX-512 kernels: 2 of 6 tries found it, at the fault's 13th and 15th step;
# 4 saw nothing in 28 steps). Its rate and latency are the fault matrix bench's to show (the
# issue's goal: within 20), and timing_checks_test replays it deterministically.
attempt "slow 1.5x from step 8" slow 1.5 8 8 change
# From the start a rank has no baseline of its own; it is compared with its peers once the
# baseline steps (warm-up 1 + calibration 3) are measured: scored from step 4, flagged at 5 (6
# with one step of noise).
attempt "slow 2x from the start" slow 2 0 7 relative

# --- hang: rank 1 stops in its first compute action of step 6 -------------------------------------
hang_fault() {  # (the body unindented: its Python heredocs start at column 0)
scenario --inject hang:1:6
demo_job "$WORK/hang.json" 40
job=$(submit "$WORK/hang.json")
# Waits on the condition (generously); the latency is measured from the timestamps of the
# worker's log and the event, not from how often this loop looks.
e=$(wait_event "$job" HANG 120) || fail "no HANG event: $(events "$job")"
[ "$(field "$e" rank)" = 1 ] && [ "$(field "$e" step)" = 6 ] || fail "hang names the wrong rank or step: $e"
msg=$(field "$e" message)
[[ "$msg" =~ ^"hang: rank 1 (dp 0) is stuck at step 6 in 1F0: no progress for "[0-9.]+" s (deadline "([0-9.]+)" s = max(floor 10.00 s, 5 x predicted step " ]] ||
  fail "hang text: $msg"
deadline_s=${BASH_REMATCH[1]}
# The worker logs when it stopped and when its position last changed (the action's start,
# before the wait for its input): the deadline runs from the latter.
hang_log=$(cat "$WORK"/worker-*.log | grep '^worker: --inject hang:1:6: stopped at step 6, ')
[[ "$hang_log" =~ "unix ms "([0-9]+)" (last progress unix ms "([0-9]+)")"$ ]] || fail "no worker logged the hang's start: $hang_log"
stopped_ms=${BASH_REMATCH[1]}
progress_ms=${BASH_REMATCH[2]}
event_ms=$(field "$e" unixMs)
/usr/bin/python3 - "$progress_ms" "$stopped_ms" "$event_ms" "$deadline_s" <<'PY' || fail "hang detection latency"
import sys
progress, stopped, event, deadline = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
latency = (event - progress) / 1e3
print("hang seen %.3f s after the rank's last progress, %.3f s after it stopped (deadline %.2f s)"
      % (latency, (event - stopped) / 1e3, deadline))
# The two times are whole milliseconds of two processes' wall clocks, read around (not at) the
# moments they stand for: the lower bound allows 5 ms of that (a fresh-clone run once measured
# 10.00 s, printed, just under a 10 s deadline).
assert deadline - 0.005 <= latency <= deadline + 1.0, "hang seen %.3f s after the rank's last progress, outside [deadline - 5 ms, deadline + 1 s]" % latency
PY
latency=$(/usr/bin/python3 -c "print('%.2f' % (($event_ms - $progress_ms) / 1e3))")
fa=$(false_alarms "$job" HANG 1)
[ "$fa" = 0 ] || fail "hang: $fa false alarm(s)"
"$PIPECTL" cancel "$job" > /dev/null
report "hang:1:6: HANG rank 1 step 6, ${latency} s after the rank's last progress, $(( event_ms - stopped_ms )) ms after it stopped (deadline ${deadline_s} s, bound deadline + 1 s, lease ${LEASE_MS} ms), $fa false alarms"
stop_all
}
attempt hang hang_fault

# --- corrupt: rank 2's GEMM flips one bit of its output from step 5 on (training and probe) ----
corrupt_fault() {  # (the body unindented: its Python heredocs start at column 0)
scenario
demo_job "$WORK/sdc.json" 10
clean=$(submit "$WORK/sdc.json")
"$PIPECTL" watch "$clean" > /dev/null || fail "the clean run of the sdc job did not succeed"
"$PIPECTL" status "$clean" --format json > "$WORK/sdc-clean.json"
stop_all
scenario --inject corrupt:2:5
job=$(submit "$WORK/sdc.json")
"$PIPECTL" watch "$job" > /dev/null || fail "sdc job did not succeed"
"$PIPECTL" status "$job" --format json > "$WORK/sdc-corrupt.json"
/usr/bin/python3 - "$WORK/sdc-clean.json" "$WORK/sdc-corrupt.json" <<'PY' || fail "the corrupted GEMM did not change training"
import json, sys
clean, bad = ([s["loss"] for s in json.load(open(p))["steps"]] for p in sys.argv[1:3])
assert clean[:5] == bad[:5], ("steps before the fault differ", clean[:5], bad[:5])
assert clean[5:] != bad[5:], ("the corrupted GEMM left the losses as they were", clean[5:])
print("corrupt:2:5: losses equal the clean run's through step 4, differ from step %d on" %
      next(i for i in range(5, 10) if clean[i] != bad[i]))
PY
e=$(first_event "$job" SDC)
[ -n "$e" ] || fail "no SDC event: $(events "$job")"
[ "$(field "$e" rank)" = 2 ] && [ "$(field "$e" step)" = 5 ] || fail "sdc names the wrong rank or step: $e"
msg=$(field "$e" message)
[[ "$msg" =~ ^"sdc: rank 2 (dp 0) step 5: probe checksum 0x"[0-9a-f]{16}" != known answer 0x"[0-9a-f]{16}" (128x64x192 GEMM); compared with the known answer only" ]] ||
  fail "sdc text: $msg"
fa=$(false_alarms "$job" SDC 2)
[ "$fa" = 0 ] || fail "corrupt: $fa false alarm(s)"
report "corrupt:2:5: SDC rank 2 step 5 (0 steps late), $fa false alarms"
stop_all
}
attempt corrupt corrupt_fault

# --- flip: one bit of one F's output on rank 1 at step 5, once (a transient) --------------------
# The replay probe re-runs the F its PROBE names (the plan's choice: the earliest F before the
# PROBE whose backward comes after it). A flip in that F is seen at step 5; a flip in another F
# is not (the losses still change): what the replay probe can and cannot see. (Ranks 2 and 3 of this zbh1 job probe
# before their first F, in the warm-up wait: they hold no F to replay.)
flip_fault() {  # (the body unindented: its Python heredocs start at column 0)
read -r replayed missed < <(/usr/bin/python3 -c '
import json, sys
acts = json.load(sys.stdin)["plan"]["ranks"][1]["actions"]
probe = next(a for a in acts if a["op"] == "PROBE")
mb = probe.get("microbatch", 0)
assert mb >= 0, ("rank 1 replays nothing", probe)
print(mb, next(a.get("microbatch", 0) for a in acts if a["op"] == "F" and a.get("microbatch", 0) != mb))' < "$WORK/sdc-clean.json")
[ -n "$replayed" ] && [ -n "$missed" ] || fail "no F to replay or miss in rank 1's plan"
for mb in "$replayed" "$missed"; do
  stop_all
  scenario --inject "flip:1:5:$mb"
  job=$(submit "$WORK/sdc.json")
  "$PIPECTL" watch "$job" > /dev/null || fail "flip job did not succeed"
  "$PIPECTL" status "$job" --format json > "$WORK/sdc-flip-$mb.json"
  /usr/bin/python3 - "$WORK/sdc-clean.json" "$WORK/sdc-flip-$mb.json" <<'PY' || fail "the flip did not change training"
import json, sys
clean, bad = ([s["loss"] for s in json.load(open(p))["steps"]] for p in sys.argv[1:3])
assert clean[:5] == bad[:5], ("steps before the flip differ", clean[:5], bad[:5])
assert clean[5:] != bad[5:], ("the flipped bit left the losses as they were", clean[5:])
PY
  n=$(count_events "$job" SDC)
  if [ "$mb" = "$replayed" ]; then
    e=$(first_event "$job" SDC)
    [ -n "$e" ] || fail "flip of the replayed F (micro-batch $mb): no SDC event: $(events "$job")"
    [ "$(field "$e" rank)" = 1 ] && [ "$(field "$e" step)" = 5 ] || fail "flip: the SDC names the wrong rank or step: $e"
    msg=$(field "$e" message)
    [[ "$msg" =~ ^"sdc: rank 1 (dp 0) step 5: replay of F stage "[0-9]+" micro-batch $mb gave 0x" ]] || fail "flip sdc text: $msg"
    [ "$n" = 1 ] || fail "flip: $n SDC events (1 expected): $(events "$job")"
    report "flip:1:5:$mb (the F the replay probe re-runs): SDC rank 1 step 5 by the replay, 0 steps late, the known-answer probe silent"
  else
    [ "$n" = 0 ] || fail "flip of micro-batch $mb, whose input is gone at the PROBE: $n SDC events: $(events "$job")"
    report "flip:1:5:$mb (an F the replay does not re-run): losses changed, no SDC (the replay cannot see it)"
  fi
done
stop_all
}
attempt flip flip_fault

# --- oom: rank 3 holds 64 MiB more than its plan from step 6 on -------------------------------
oom_fault() {  # (the body unindented: its Python heredocs start at column 0)
scenario --inject oom:3:67108864:6
demo_job "$WORK/oom.json" 10
job=$(submit "$WORK/oom.json")
"$PIPECTL" watch "$job" > /dev/null || fail "oom job did not succeed"
e=$(first_event "$job" MEMORY)
[ -n "$e" ] || fail "no MEMORY event: $(events "$job")"
[ "$(field "$e" rank)" = 3 ] && [ "$(field "$e" step)" = 6 ] || fail "memory event (rank 3, step 6 expected): $e"
budget=$("$PIPECTL" status "$job" --format json | json_field '["plan"]["memoryBudgetBytes"][3]')
msg=$(field "$e" message)
want=$(/usr/bin/python3 -c "b=$budget; print('memory: rank 3 (dp 0) step 6: peak %.2f MiB is over the plan\'s budget %.2f MiB by %.2f MiB' % ((b + 2**26) / 2**20, b / 2**20, 2**26 / 2**20))")
[ "$msg" = "$want" ] || fail "memory text: $msg, want $want"
n=$(count_events "$job" MEMORY)
fa=$(false_alarms "$job" MEMORY 3)
[ "$n" = 1 ] && [ "$fa" = 0 ] || fail "oom: $n MEMORY event(s), $fa false alarm(s)"
report "oom:3:67108864:6: MEMORY rank 3 step 6 (0 steps late), $fa false alarms"
stop_all
}
attempt oom oom_fault

# --- slowlink: every message rank 1 sends from step 8 on reaches its link 80 ms late -----------
# Its neighbours wait for it: a BUBBLE on rank 0 (gradients) or rank 2 (activations) names rank 1
# as the peer waited on; the steps' idle split moves the late transfers into comm idle and names
# a link from rank 1 as the cause (its inputs left on time and arrived late). Ranks further down the chain wait for their neighbour in
# turn, which their own BUBBLE events name (printed, not counted as detection).
slowlink_fault() {  # (the body unindented: its Python heredocs start at column 0)
scenario --inject slowlink:1:80:8
demo_job "$WORK/slowlink.json" 20
job=$(submit "$WORK/slowlink.json")
"$PIPECTL" watch "$job" > /dev/null || fail "slowlink job did not succeed"
"$PIPECTL" status "$job" --format json > "$WORK/slowlink.status.json"
events "$job" > "$WORK/slowlink.events"
/usr/bin/python3 - "$WORK/slowlink.status.json" "$WORK/slowlink.events" <<'PY' || fail "slowlink checks"
import json, re, sys
job = json.load(open(sys.argv[1]))
events = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
found = [e for e in events if e["kind"] == "BUBBLE" and e.get("rank", 0) in (0, 2)
         and re.search(r"waited [0-9.]+ s for rank 1 \(dp 0\)", e["message"])]
assert found, ("no BUBBLE naming rank 1 as the peer waited on", [e["message"] for e in events])
first = min(e.get("step", 0) for e in found)
assert 8 <= first < 8 + 5, ("detected at step", first)
assert not [e for e in events if e["kind"] != "BUBBLE"], [e["message"] for e in events if e["kind"] != "BUBBLE"]
# Every BUBBLE names rank 1: waited for, or the root of its wait chain (the link from it).
stray = [e["message"] for e in events if not (re.search(r"waited [0-9.]+ s for rank 1 \(dp 0\)", e["message"])
                                              or "root of the wait chain: the link from rank 1 (dp 0)" in e["message"])]
assert not stray, stray
steps = {s.get("step", 0): s for s in job["steps"]}
before = steps[6]["stepTimeS"]
# protobuf's JSON leaves out zeros and false: a missing causeRank is rank 0.
def cause(t):
    return (t.get("causeRank", 0), t.get("causeLinkTo", 0) if t.get("causeIsLink") else None)
causes = [cause(steps[k].get("idleTotal", {})) for k in range(9, 20)]
links = [c for c in causes if c[0] == 1 and c[1] in (0, 2)]
assert len(links) >= 8, ("the idle split's cause (rank, link to), steps 9-19", causes)
comm_before = sum(r["split"].get("commS", 0) for r in steps[6]["idle"])
comm_after = sum(r["split"].get("commS", 0) for r in steps[15]["idle"])
assert comm_after > comm_before + 0.08, ("comm idle over all ranks, step 6 and 15", comm_before, comm_after)
print("slowlink:1:80:8: BUBBLE naming rank 1 at step %d (the fault's step %d); step %.1f -> %.1f ms; comm idle "
      "%.1f -> %.1f ms over all ranks; the idle split's cause a link from rank 1 in %d of steps 9-19 (%s); BUBBLE "
      "events of ranks waiting on a waiting neighbour, naming the link from rank 1 as their root: %d"
      % (first, first - 8 + 1, before * 1e3, steps[15]["stepTimeS"] * 1e3, comm_before * 1e3, comm_after * 1e3,
         len(links), sorted(set(links)), len([e for e in events if e not in found])))
print(found[0]["message"])
PY
stop_all
}
attempt slowlink slowlink_fault

# --- SIGKILL: the worker holding rank 2 dies mid-job ------------------------------------------
kill_fault() {  # (the body unindented: its Python heredocs start at column 0)
scenario
demo_job "$WORK/kill.json" 1000
job=$(submit "$WORK/kill.json")
for _ in $(seq 600); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')" -ge 6 ] && break
  sleep 0.05
done
victim_id=$("$PIPECTL" workers --format json | /usr/bin/python3 -c "
import json, sys
print([w['workerId'] for w in json.load(sys.stdin)['workers'] if w.get('rank', 0) == 2 and w.get('jobId') == '$job'][0])")
victim_pid=""
for i in "${!WORKER_LOGS[@]}"; do
  grep -q "^worker: registered as $victim_id," "${WORKER_LOGS[$i]}" && victim_pid=${PIDS[$((i + 1))]}
done
[ -n "$victim_pid" ] || fail "no worker process registered as $victim_id"
kill_and_wait_failed "$job" "$victim_pid"
latency_ms=$KILL_TO_FAILED_MS
[ "$latency_ms" -le $((LEASE_MS + 1000)) ] || fail "the kill was seen after ${latency_ms} ms, more than the lease + 1 s"
cause=$(json_field '["failureCause"]' < "$WORK/status.json")
[[ "$cause" == *"$victim_id (rank 2) lost its lease"* || "$cause" == "rank 2 ($victim_id, global rank 2) stopped answering its peers: "* ]] ||
  fail "the cause does not name rank 2 ($victim_id): $cause"
fa=$(count_events "$job" health)
[ "$fa" = 0 ] || fail "kill: $fa health event(s): $(events "$job")"
report "SIGKILL rank 2: FAILED naming rank 2 after ${latency_ms} ms (lease ${LEASE_MS} ms), $fa false alarms"
stop_all
}
attempt SIGKILL kill_fault

# --- clean: 5 demo jobs of 40 steps and one of 200, no event ----------------------------------
clean_runs() {  # (the body unindented: its Python heredocs start at column 0)
scenario
clean_events=0
for steps in 40 40 40 40 40 200; do
  demo_job "$WORK/clean.json" "$steps"
  job=$(submit "$WORK/clean.json")
  "$PIPECTL" watch "$job" > /dev/null || fail "clean job $job did not succeed"
  n=$(count_events "$job" health)
  clean_events=$((clean_events + n))
  [ "$n" = 0 ] || echo "clean $job ($steps steps): $n health event(s): $(events "$job")" >&2
  report "clean $job: $steps steps, $n health events"
done
[ "$clean_events" = 0 ] || fail "clean runs raised $clean_events health event(s)"
stop_all
}
attempt clean clean_runs

echo "--- fault matrix at the default thresholds"
cat "$SUMMARY"
echo "e2e health faults: ok"
