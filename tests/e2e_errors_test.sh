#!/usr/bin/env bash
# Every kind of bad input gets a clear error naming the field, and harms nothing stored.
source tests/lib.sh
start_coordinator

expect() {  # expect EXIT_CODE "message fragment" command...
  local want=$1 text=$2
  shift 2
  local rc=0
  "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, want $want: $(cat "$WORK/err")"
  grep -qF -- "$text" "$WORK/err" || fail "$*: stderr lacks \"$text\": $(cat "$WORK/err")"
}

job_json "$WORK/ok.json"
good=$("$PIPECTL" submit "$WORK/ok.json" --format json | json_field '["jobId"]')

check() {  # check "expected message" "override..."; the whole of stderr must be that message
  local msg=$1
  shift
  job_json "$WORK/bad.json" "$@"
  expect 2 "$msg" "$PIPECTL" submit "$WORK/bad.json"
  [ "$(cat "$WORK/err")" = "pipectl submit: $msg" ] || fail "submit $*: stderr [$(cat "$WORK/err")], want [pipectl submit: $msg]"
}
check "spec.pp: must be in 1..4096, got 0" pp=0
check "spec.model.heads: must divide spec.model.hidden (32), got 5" model.heads=5
job_json "$WORK/bad.json" schedule='"gpipe"'
expect 2 'pipectl submit: spec.schedule: unknown name "gpipe" (known: fthenb, 1f1b,' "$PIPECTL" submit "$WORK/bad.json"
check "spec.microbatches: must be in 1..65536, got 0" microbatches=0
check "spec.microBatchSize: must be in 1..65536, got -1" microBatchSize=-1
check "spec.steps: must be in 1..10000000, got 0" steps=0
check "spec.model.vocab: must be in 2..4194304, got 1" model.vocab=1
check "spec.model.hidden: must be in 1..65536, got 65540" model.hidden=65540
check "spec.model.ffnHidden: must be in 0..1048576, got -1" model.ffnHidden=-1
check "spec.model.layers: must be >= spec.pp x spec.vpp = 8 (a layer for each stage), got 4" schedule='"interleaved"' pp=4
check "spec.stageLayers: counts must sum to spec.model.layers (4), got 5" stageLayers='[3, 2]'
check "spec.stageLayers[1]: must be >= 2 (a layer for each of rank 1's 2 chunk(s)), got 1" schedule='"interleaved"' stageLayers='[3, 1]'
check 'spec.device: must be "cpu" or "cuda", got "tpu"' device='"tpu"'
check "spec.learningRate: must be in [0, 10], got -0.5" learningRate=-0.5
check "spec.learningRate: must be in [0, 10], got 1e+308" learningRate=1e308
check "spec.costs.w: must be a finite number >= 0, got -1" costs='{"w": -1}'
check "spec.memLimit: must be a finite number >= 0, got -2" memLimit=-2
check "spec.health.stragglerMinDeltaS: must be in [0, 3600], got -1" health='{"stragglerMinDeltaS": -1}'
check 'spec.vpp: schedule 1f1b places exactly 1 chunk(s) per rank, got 3' vpp=3
# What planning refuses is said about the spec's field too.
check "spec.microbatches: dualpipev needs at least 2 x pp = 4 micro-batches, got 3" schedule='"dualpipev"' microbatches=3
echo '{"pp": "two"}' > "$WORK/malformed.json"
expect 2 "not a JobSpec" "$PIPECTL" submit "$WORK/malformed.json"
echo '{"pipeline": 2}' > "$WORK/unknown.json"
expect 2 "pipectl submit: $WORK/unknown.json: spec: unknown field \"pipeline\" (JobSpec's fields: name, model, schedule, pp," \
  "$PIPECTL" submit "$WORK/unknown.json"
# A misspelt key: the closest valid names, at the depth it was written.
echo '{"model": {"hiden": 32}}' > "$WORK/misspelt.json"
expect 2 "pipectl submit: $WORK/misspelt.json: spec.model: unknown field \"hiden\": did you mean \"hidden\"? (ModelSpec's fields: " \
  "$PIPECTL" submit "$WORK/misspelt.json"
expect 2 "pipectl submit: cannot open $WORK/missing.json: No such file or directory" "$PIPECTL" submit "$WORK/missing.json"
# A key given twice is refused, not read as its last value.
job_json "$WORK/dup.json" learningRate=0.01
sed -i 's/"learningRate": 0.01/"learningRate": 0.01, "learningRate": 5/' "$WORK/dup.json"
expect 2 "pipectl submit: $WORK/dup.json: duplicate key \"learningRate\" in spec (line 1, first on line 1)" \
  "$PIPECTL" submit "$WORK/dup.json"

for verb in status cancel trace watch resubmit; do
  expect 2 'job "job-424242" not found' "$PIPECTL" $verb job-424242
done

# pipectl refuses a spec file over 16 MiB itself (the coordinator's 64 MiB gRPC limit is tested
# in python_client_test, which bypasses pipectl).
/usr/bin/python3 - "$WORK/huge.json" <<'PY'
import json, sys
json.dump({"name": "x", "schedule": "csv", "csvSchedule": "0F0," * (5 << 20)}, open(sys.argv[1], "w"))
PY
expect 2 "pipectl submit: $WORK/huge.json: must be at most 16777216 bytes, got $(stat -c %s "$WORK/huge.json")" \
  "$PIPECTL" submit "$WORK/huge.json"
[ "$("$PIPECTL" status "$good" --format json | json_field '["state"]')" = "PENDING" ] || fail "good job harmed"
[ "$("$PIPECTL" jobs --format json | json_field '["jobs"].__len__()')" = "1" ] || fail "a bad spec was stored"

# Options before the verb, against a live coordinator; an unknown --format is refused (exit 2).
[ "$(env -u PIPECOORD_ADDR "$PIPECTL" --coordinator "$PIPECOORD_ADDR" --format json jobs | json_field '["jobs"].__len__()')" = "1" ] ||
  fail "--coordinator and --format before the verb"
expect 2 'pipectl jobs: --format: must be text or json, got "yaml"' "$PIPECTL" jobs --format yaml
[ ! -s "$WORK/out" ] || fail "jobs --format yaml printed: $(cat "$WORK/out")"

# resubmit: the same spec as a new job; the id in text and JSON.
again=$("$PIPECTL" resubmit "$good" --format json | json_field '["jobId"]')
[ -n "$again" ] && [ "$again" != "$good" ] || fail "resubmit gave no new id: [$again]"
same=$(/usr/bin/python3 -c '
import json, subprocess, sys
spec = lambda j: json.loads(subprocess.check_output([sys.argv[1], "status", j, "--format", "json"]))["spec"]
print(spec(sys.argv[2]) == spec(sys.argv[3]))' "$PIPECTL" "$good" "$again")
[ "$same" = "True" ] || fail "resubmit of $good ($again) has another spec"
"$PIPECTL" resubmit "$again" > "$WORK/resubmit.out" || fail "resubmit (text) failed"
grep -qE "^job-[0-9]+ submitted from $again's spec \(predicted bubble rate 0\.[0-9]+, makespan [0-9.]+ cost units\)$" "$WORK/resubmit.out" ||
  fail "resubmit printed: $(cat "$WORK/resubmit.out")"
# The coordinator's own flags: a bad value exits 2 naming the flag and its range.
expect 2 "--max-jobs: must be in 1..1000000" "$COORDINATOR" --listen 127.0.0.1:0 --max-jobs 0
expect 2 "--lease-ms: must be in 100..3600000" "$COORDINATOR" --listen 127.0.0.1:0 --lease-ms 5
expect 2 "--keepalive-ms: must be 0 (never) or in 1000..3600000" "$COORDINATOR" --listen 127.0.0.1:0 --keepalive-ms 5

# A running job whose coordinator is killed and restarted on its state file while its workers
# die too: it waits --adopt-grace-ms for them, then fails naming the ranks that did not come back.
start_coordinator --state "$WORK/state.db"
killed=${PIDS[-1]}
start_workers 2
job_json "$WORK/long.json" steps=1000000
running=$("$PIPECTL" submit "$WORK/long.json" --format json | json_field '["jobId"]')
for _ in $(seq 200); do
  [ "$("$PIPECTL" status "$running" --format json | json_field '["state"]')" = "RUNNING" ] && break
  sleep 0.05
done
ids=$("$PIPECTL" status "$running" --format json | json_field '["workerIds"]' | tr -d "[]',")
kill -9 "$killed" "${PIDS[-1]}" "${PIDS[-2]}"
wait "$killed" "${PIDS[-1]}" "${PIDS[-2]}" 2>/dev/null || true
start_coordinator --state "$WORK/state.db" --adopt-grace-ms 500
for _ in $(seq 100); do
  [ "$("$PIPECTL" status "$running" --format json | json_field '["state"]')" = "FAILED" ] && break
  sleep 0.05
done
read -r w0 w1 <<< "$ids"
"$PIPECTL" status "$running" > "$WORK/status.out" || fail "status after the restart failed"
grep -qx "cause     the coordinator restarted and rank 0 (dp 0) on $w0, rank 1 (dp 0) on $w1 did not come back within 500 ms (rank 0)" \
  "$WORK/status.out" || fail "status of a job whose workers did not come back: $(cat "$WORK/status.out")"
expect 2 "--adopt-grace-ms: must be in 100..86400000" "$COORDINATOR" --listen 127.0.0.1:0 --adopt-grace-ms 5
# A worker given a wrong coordinator address says so and exits instead of retrying forever.
expect 2 'worker: --coordinator: must be HOST:PORT (the coordinator'"'"'s gRPC --listen address, e.g. 127.0.0.1:50051), got "127.0.0.1"' \
  timeout 20 "$WORKER" --coordinator 127.0.0.1
start_coordinator --http 127.0.0.1:0
http_addr=$(sed -n 's/^coordinator http on \([^ ]*\) .*/\1/p' "$WORK/coordinator.log")
[ -n "$http_addr" ] || fail "no http address in $(cat "$WORK/coordinator.log")"
expect 1 "worker: the coordinator address answers HTTP/1, not gRPC (the coordinator's --http port?): give its gRPC --listen address" \
  timeout 20 "$WORKER" --coordinator "$http_addr"
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

# A job can never take its workers down. A job whose rank budgets exceed what every free worker
# offers is never dispatched: it waits, saying why (a 16-layer h 2048 pp 2 job needs ~8 GB a rank,
# the workers offer 3 GiB).
start_coordinator
start_workers 2 --memory 3GiB
job_json "$WORK/huge-model.json" model.layers=16 model.hidden=2048 model.heads=16
huge=$("$PIPECTL" submit "$WORK/huge-model.json" --format json | json_field '["jobId"]')
sleep 0.5
"$PIPECTL" status "$huge" > "$WORK/huge.out"
grep -q "^state     PENDING$" "$WORK/huge.out" || fail "a job too big for its workers was dispatched: $(cat "$WORK/huge.out")"
grep -qE "^event     waiting for workers with room: its largest rank budget is [0-9.]+ GiB, 2 more worker\(s\) offering that much are needed \(free workers offering less, at most 3.00 GiB, are passed over\)$" \
  "$WORK/huge.out" || fail "no reason given for the wait: $(cat "$WORK/huge.out")"
"$PIPECTL" cancel "$huge" > /dev/null
# A worker whose host cannot give a rank's memory (std::bad_alloc: here an address-space limit
# below what it claims to offer) reports it and stays up for the next job.
(ulimit -v 3000000; exec "$WORKER" --coordinator "$PIPECOORD_ADDR" --memory 64GiB > "$WORK/capped.log" 2>&1) &
capped_pid=$!
PIDS+=("$capped_pid")
for _ in $(seq 100); do grep -q "registered as" "$WORK/capped.log" && break; sleep 0.05; done
capped=$(sed -n 's/^worker: registered as \([^,]*\),.*/\1/p' "$WORK/capped.log")
[ -n "$capped" ] || fail "the capped worker did not register"
job_json "$WORK/oom.json" pp=1 maxRestarts=0 model.layers=4 model.hidden=2048 model.heads=16
oom=$("$PIPECTL" submit "$WORK/oom.json" --format json | json_field '["jobId"]')
timeout 60 "$PIPECTL" watch "$oom" > /dev/null && fail "the job that cannot fit succeeded"
"$PIPECTL" status "$oom" > "$WORK/oom.out"
grep -qE "^cause     rank 0 \(worker-[0-9]+\): out of memory: the host could not allocate what rank 0 \(dp 0\) needs \(std::bad_alloc\) \(rank 0\)$" \
  "$WORK/oom.out" || fail "out of memory not reported: $(cat "$WORK/oom.out")"
job_json "$WORK/after.json" pp=1 steps=2
after=$("$PIPECTL" submit "$WORK/after.json" --format json | json_field '["jobId"]')
timeout 60 "$PIPECTL" watch "$after" > /dev/null || fail "the next job failed"
kill -0 "$capped_pid" && "$PIPECTL" workers --format json | grep -q "\"$capped\"" || fail "the worker that ran out of memory is gone"
echo "e2e errors: ok"
