#!/usr/bin/env bash
# Coordinators in high availability, over real processes: a three-member etcd cluster and three
# coordinators (--etcd) on loopback ports, four CPU workers and pipectl given all three addresses.
#  (b) the active coordinator SIGKILLed mid-job; then one etcd member stopped mid-job: each time
#      the time until a standby is active (or the active one goes on) and the job's next step is
#      recorded, and the job SUCCEEDS with every step once, losses equal to an uninterrupted run's
#      bit for bit, no restart counted, as many measured actions as that run;
#  (c) the active coordinator SIGSTOPped until a standby took over and the job went on, then
#      SIGCONTed: it finds its election lost and exits without writing (its state writes are
#      guarded by its election key) and the job is untouched by it: losses equal, no restart.
source tests/lib.sh

free_ports() { /usr/bin/python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"; }
now() { date +%s.%N; }
listened() { grep -c "listening on" "$WORK/coordinator-$1.log" || true; }  # how often coordinator $1 served
secs() { /usr/bin/python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }

read -r -a P <<< "$(free_ports 9)"
ETCD_CLIENT=() ETCD_PEER=() CLUSTER=""
for i in 0 1 2; do
  ETCD_CLIENT+=("127.0.0.1:${P[$i]}")
  ETCD_PEER+=("http://127.0.0.1:${P[$((i + 3))]}")
  CLUSTER+="${CLUSTER:+,}e$i=${ETCD_PEER[$i]}"
done
ETCD_ENDPOINTS=$(IFS=,; echo "${ETCD_CLIENT[*]}")
ETCD_PIDS=()
for i in 0 1 2; do
  etcd --name "e$i" --data-dir "$WORK/etcd-$i" --listen-client-urls "http://${ETCD_CLIENT[$i]}" \
    --advertise-client-urls "http://${ETCD_CLIENT[$i]}" --listen-peer-urls "${ETCD_PEER[$i]}" \
    --initial-advertise-peer-urls "${ETCD_PEER[$i]}" --initial-cluster "$CLUSTER" --initial-cluster-state new \
    --max-request-bytes 67108864 > "$WORK/etcd-$i.log" 2>&1 &
  ETCD_PIDS+=($!)
  PIDS+=($!)
done
for _ in $(seq 200); do
  ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" endpoint health > /dev/null 2>&1 && break
  sleep 0.1
done
ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" endpoint health > /dev/null 2>&1 || fail "etcd did not start"

COORD_ADDRS=() COORD_PIDS=()
for i in 0 1 2; do COORD_ADDRS+=("127.0.0.1:${P[$((i + 6))]}"); done
ALL=$(IFS=,; echo "${COORD_ADDRS[*]}")
# start_coordinator_n I: coordinator I (as a supervisor would start it again after a crash), at
# the default lease (5 s): a state write waits for etcd under the coordinator's lock, and when the
# member that was etcd's raft leader dies, writes wait up to the etcd call timeout (3 s) for a new
# leader; with --lease-ms 2000 that stall once cost a worker its lease (docs/operations.md).
start_coordinator_n() {
  "$COORDINATOR" --listen "${COORD_ADDRS[$1]}" --etcd "$ETCD_ENDPOINTS" --ha-name e2e --ha-lease-s 2 \
    >> "$WORK/coordinator-$1.log" 2>&1 &
  COORD_PIDS[$1]=$!
  PIDS+=($!)
}
# active: the index of the live coordinator that began serving since LISTENED was taken (-1: none).
active() {
  local i
  for i in 0 1 2; do
    kill -0 "${COORD_PIDS[$i]}" 2>/dev/null || continue
    [ "$(listened "$i")" -gt "${LISTENED[$i]:-0}" ] && { echo "$i"; return; }
  done
  echo -1
}
for i in 0 1 2; do : > "$WORK/coordinator-$i.log"; start_coordinator_n "$i"; sleep 0.3; done
LISTENED=(0 0 0)
for _ in $(seq 200); do [ "$(active)" -ge 0 ] && break; sleep 0.05; done
first=$(active)
[ "$first" -ge 0 ] || fail "no coordinator became active"
sleep 0.5
standing=$(grep -l "standing by: the active coordinator is ${COORD_ADDRS[$first]}" "$WORK"/coordinator-*.log | wc -l)
[ "$standing" = 2 ] || fail "expected two standbys naming ${COORD_ADDRS[$first]}, got $standing"
echo "coordinator $first active at ${COORD_ADDRS[$first]}, two standing by"
# A standby serves nothing: its port is closed.
for i in 0 1 2; do
  [ "$i" = "$first" ] && continue
  ! (exec 3<> "/dev/tcp/127.0.0.1/${COORD_ADDRS[$i]##*:}") 2>/dev/null || fail "standby $i accepts connections"
done

export PIPECOORD_ADDR=$ALL
start_workers 4

steps=1200
job_json "$WORK/reference.json" steps=$steps dp=2
reference=$("$PIPECTL" submit "$WORK/reference.json" --format json | json_field '["jobId"]')
timeout 300 "$PIPECTL" watch "$reference" > /dev/null || fail "the reference run failed"
"$PIPECTL" status "$reference" --format json > "$WORK/reference.status.json"
"$PIPECTL" trace "$reference" --out "$WORK/reference.trace.json" > /dev/null || fail "trace of the reference"

steps_done() { "$PIPECTL" status "$1" --format json 2>/dev/null | json_field '.get("stepsDone", 0)' 2>/dev/null || echo -1; }

# check_job JOB LABEL: the job's record against the reference run's.
check_job() {
  timeout 300 "$PIPECTL" watch "$1" > /dev/null || fail "$2: the job did not succeed: $("$PIPECTL" status "$1" | head -5)"
  "$PIPECTL" status "$1" --format json > "$WORK/$1.status.json"
  "$PIPECTL" trace "$1" --out "$WORK/$1.trace.json" > /dev/null || fail "$2: trace"
  /usr/bin/python3 - "$WORK" "$1" "$steps" "$2" <<'PY' || fail "$2: checks"
import json, sys
work, job_id, steps, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ref = json.load(open(work + "/reference.status.json"))
job = json.load(open(work + "/" + job_id + ".status.json"))
assert job["state"] == "SUCCEEDED", (job["state"], job.get("failureCause"))
assert job.get("restarts", 0) == 0, job.get("restarts")
assert [s.get("step", 0) for s in job["steps"]] == list(range(steps)), "each step once, in order"
want = [s["loss"] for s in ref["steps"]]
got = [s["loss"] for s in job["steps"]]
assert got == want, next((i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b)
events = [e["message"] for e in job["events"]]
assert not any(m.startswith(("restarting", "back in the queue", "FAILED")) for m in events), events
def measured(path):
    return sum(1 for e in json.load(open(path))["traceEvents"] if e.get("pid") == 0 and e.get("ph") == "X")
n_ref, n_job = measured(work + "/reference.trace.json"), measured(work + "/" + job_id + ".trace.json")
assert n_job == n_ref, ("measured actions", n_job, "uninterrupted", n_ref)
print("%s: %d steps once, losses equal the uninterrupted run's bit for bit, %d measured actions as it had, "
      "no restart" % (label, steps, n_job))
PY
}

# submit_and_wait: a job with at least 5 steps done.
submit_and_wait() {
  job_json "$WORK/job.json" steps=$steps dp=2
  JOB=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
  wait_steps "$JOB" 5
}

# (b1) SIGKILL the active coordinator. The Python client's watch, given every coordinator's
# address, follows the job through the failover.
submit_and_wait
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
PYTHONPATH="$gen:python" /usr/bin/python3 - "$ALL" "$JOB" > "$WORK/pywatch.out" 2>&1 <<'PY' &
import sys
from pipecoord.client import Client, StepUpdate
client = Client(sys.argv[1])
steps = [u.step for u in client.watch(sys.argv[2]) if isinstance(u, StepUpdate)]
print("python watch: %d steps, %s" % (len(steps), "each once in order" if steps == list(range(len(steps))) else "NOT in order"))
print("python watch ended: " + client.get(sys.argv[2]).state)
PY
pywatcher=$!
sleep 0.3
done_before=$(steps_done "$JOB")
for i in 0 1 2; do LISTENED[$i]=$(listened "$i"); done
kill -KILL "${COORD_PIDS[$first]}"
killed_at=$(now)
wait "${COORD_PIDS[$first]}" 2>/dev/null || true
for _ in $(seq 400); do [ "$(active)" -ge 0 ] && break; sleep 0.02; done
second=$(active)
[ "$second" -ge 0 ] || fail "no standby took over after the active coordinator was killed"
active_at=$(now)
for _ in $(seq 1500); do [ "$(steps_done "$JOB")" -gt "$done_before" ] && break; sleep 0.02; done
next_step_at=$(now)
[ "$(steps_done "$JOB")" -gt "$done_before" ] || fail "no step recorded after the failover"
echo "SIGKILL of the active coordinator: coordinator $second active after $(secs "$killed_at" "$active_at") s;" \
     "the job's next step recorded after $(secs "$killed_at" "$next_step_at") s"
start_coordinator_n "$first"  # the supervisor brings it back: a standby now
check_job "$JOB" "active coordinator SIGKILLed"
wait "$pywatcher" || fail "the Python client's watch failed: $(cat "$WORK/pywatch.out")"
grep -qx "python watch: $steps steps, each once in order" "$WORK/pywatch.out" &&
  grep -qx "python watch ended: SUCCEEDED" "$WORK/pywatch.out" || fail "Python client's watch: $(cat "$WORK/pywatch.out")"
echo "the Python client's watch over $ALL followed the job through the failover: $(head -1 "$WORK/pywatch.out")"

# (b2) Stop one etcd member (SIGKILL) mid-job: the cluster keeps its quorum.
submit_and_wait
done_before=$(steps_done "$JOB")
kill -KILL "${ETCD_PIDS[1]}"
stopped_at=$(now)
wait "${ETCD_PIDS[1]}" 2>/dev/null || true
for _ in $(seq 1500); do [ "$(steps_done "$JOB")" -gt "$done_before" ] && break; sleep 0.02; done
next_step_at=$(now)
now_active=$(active)
echo "etcd member e1 stopped: coordinator ${now_active} active; the job's next step recorded after" \
     "$(secs "$stopped_at" "$next_step_at") s"
check_job "$JOB" "one etcd member stopped"
[ "$now_active" = "$second" ] || echo "note: the active coordinator changed when e1 stopped (to $now_active)"
second=$(active)

# (c) SIGSTOP the active coordinator until a standby is active and the job goes on; then SIGCONT.
submit_and_wait
for i in 0 1 2; do LISTENED[$i]=$(listened "$i"); done
stale=$second
kill -STOP "${COORD_PIDS[$stale]}"
stopped_at=$(now)
third=-1
for _ in $(seq 1000); do
  for i in 0 1 2; do
    [ "$i" = "$stale" ] && continue
    [ "$(listened "$i")" -gt "${LISTENED[$i]}" ] && third=$i
  done
  [ "$third" -ge 0 ] && break
  sleep 0.02
done
[ "$third" -ge 0 ] || fail "no standby took over from the paused coordinator"
active_at=$(now)
# pipectl from here asks the new coordinator by its own address: a paused coordinator's port
# still accepts TCP connections but never answers, and pick_first over the list waits gRPC's
# connect timeout (20 s) on it before it tries the next address (docs/operations.md).
export PIPECOORD_ADDR=${COORD_ADDRS[$third]}
done_before=$(steps_done "$JOB")
for _ in $(seq 3000); do [ "$(steps_done "$JOB")" -gt "$done_before" ] && break; sleep 0.02; done
[ "$(steps_done "$JOB")" -gt "$done_before" ] || fail "the job did not go on under the new coordinator"
went_on_at=$(now)
echo "SIGSTOP of the active coordinator: coordinator $third active after $(secs "$stopped_at" "$active_at") s;" \
     "steps recorded by it after $(secs "$stopped_at" "$went_on_at") s"
kill -CONT "${COORD_PIDS[$stale]}"
status=0
timeout 20 tail --pid="${COORD_PIDS[$stale]}" -f /dev/null || fail "the stale coordinator is still running 20 s after SIGCONT"
wait "${COORD_PIDS[$stale]}" || status=$?
[ "$status" = 3 ] || fail "the stale coordinator exited $status, not 3"
grep -q "no longer the elected coordinator" "$WORK/coordinator-$stale.log" ||
  fail "the stale coordinator did not say it lost its election: $(tail -3 "$WORK/coordinator-$stale.log")"
echo "the stale coordinator, resumed: $(grep "no longer the elected coordinator" "$WORK/coordinator-$stale.log" | tail -1)"
check_job "$JOB" "active coordinator paused, then resumed stale"
export PIPECOORD_ADDR=$ALL
# What the stale coordinator may have sent before it found its election lost, the workers ignored
# (daemon_test checks that rule itself); the job's record above shows nothing of it took effect.
echo "commands of an older epoch ignored by the workers: $(cat "$WORK"/worker-*.log | grep -c "older coordinator epoch" || true)"
echo "e2e high availability: ok"
