#!/usr/bin/env bash
# One coordinator per port and per state file: a second one on the same --listen port, or on the
# same --state file, refuses to start (exit != 0) naming the port or file and the process holding
# it; the first keeps serving every client alone.
source tests/lib.sh
start_coordinator --state "$WORK/state.db" --http 127.0.0.1:0
first_pid=${PIDS[-1]}
port=${PIPECOORD_ADDR##*:}
job_json "$WORK/job.json" pp=1 steps=1
"$PIPECTL" submit "$WORK/job.json" > /dev/null || fail "submit"

set +e
timeout 20 "$COORDINATOR" --listen "127.0.0.1:$port" > "$WORK/second-port.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "a second coordinator on port $port exited $rc, want 1: $(cat "$WORK/second-port.out")"
want="coordinator: --listen 127.0.0.1:$port: cannot listen on 127.0.0.1:$port: port $port is in use by pid $first_pid (coordinator)"
grep -qxF "$want" "$WORK/second-port.out" || fail "second coordinator's message: $(cat "$WORK/second-port.out"), want: $want"
grep -q "listening" "$WORK/second-port.out" && fail "the second coordinator claimed to listen"

set +e
timeout 20 "$COORDINATOR" --listen 127.0.0.1:0 --state "$WORK/state.db" > "$WORK/second-state.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a second coordinator on the state file exited $rc, want 2: $(cat "$WORK/second-state.out")"
want="coordinator: --state $WORK/state.db: the state file is in use by another coordinator (pid $first_pid (coordinator)); one coordinator per state file"
grep -qxF "$want" "$WORK/second-state.out" || fail "second coordinator's message: $(cat "$WORK/second-state.out"), want: $want"

# Every call still reaches the one coordinator: the same single job, ten times over.
for _ in $(seq 10); do
  n=$("$PIPECTL" jobs --format json | json_field '.get("jobs", []).__len__()')
  [ "$n" -eq 1 ] || fail "pipectl jobs saw $n jobs, want 1"
done

# Once the first has stopped, the file and the port are free again.
kill "$first_pid"
wait "$first_pid" || true
"$COORDINATOR" --listen "127.0.0.1:$port" --state "$WORK/state.db" > "$WORK/third.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$WORK/third.log" && break; sleep 0.05; done
grep -q "coordinator listening on 127.0.0.1:$port" "$WORK/third.log" || fail "a coordinator after the first did not start: $(cat "$WORK/third.log")"
n=$("$PIPECTL" jobs --format json | json_field '.get("jobs", []).__len__()')
[ "$n" -eq 1 ] || fail "the restarted coordinator has $n jobs, want 1 (from the state file)"
echo "e2e one coordinator: ok"
