#!/usr/bin/env bash
# TLS, mutual TLS and the bearer token over real processes on loopback, with certificates made
# here by openssl (deploy/local/pki.sh). Refused: a submit or cancel without the token or with a
# wrong one (UNAUTHENTICATED, pipectl exit 1 with a clear message); a worker whose certificate
# names another worker (PERMISSION_DENIED on every WorkerService call); a client without the CA,
# with another CA, or in plaintext (cannot connect); half-configured TLS (exit 2 naming the flag).
# The happy path: a job runs to SUCCEEDED over TLS + mTLS + token, from pipectl and Python.
source tests/lib.sh
source deploy/local/pki.sh
export PIPECOORD_TLS_CA="" PIPECOORD_TOKEN=""
pki=$WORK/pki
pki_ca "$pki"
pki_server "$pki" coordinator "DNS:localhost,IP:127.0.0.1"
pki_worker "$pki" trainer-0
pki_worker "$pki" trainer-1
# A client certificate from the right CA that names no worker, and a worker from another CA.
_pki_sign "$pki" nameless "$pki/ca" "extendedKeyUsage=clientAuth"
pki_ca "$pki/rogue"
pki_worker "$pki/rogue" trainer-0
pki_token "$pki/token"
token=$(cat "$pki/token")
tls=(--tls-cert "$pki/coordinator.crt" --tls-key "$pki/coordinator.key" --tls-ca "$pki/ca.crt" --token-file "$pki/token")

expect() {  # expect EXIT_CODE "stderr fragment" command...
  local want=$1 text=$2
  shift 2
  local rc=0
  timeout 30 "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, want $want: $(cat "$WORK/err")"
  grep -qF -- "$text" "$WORK/err" || fail "$*: stderr lacks \"$text\": $(cat "$WORK/err")"
}

# Half-configured TLS, the token on a placeholder: refused before serving.
expect 2 "--token-file: required with --tls-cert (the bearer token SubmitJob and CancelJob need)" \
  "$COORDINATOR" --listen 127.0.0.1:0 "${tls[@]:0:6}"
expect 2 "--tls-cert: required with --tls-key, --tls-ca or --token-file (TLS is all or nothing)" \
  "$COORDINATOR" --listen 127.0.0.1:0 --token-file "$pki/token"
printf 'REPLACE-ME\n' > "$WORK/placeholder"
expect 2 "the token must be 16..4096 characters" \
  "$COORDINATOR" --listen 127.0.0.1:0 "${tls[@]:0:6}" --token-file "$WORK/placeholder"
expect 2 "--tls-key: \"$pki/coordinator.crt\" holds no PEM private key" \
  "$COORDINATOR" --listen 127.0.0.1:0 "${tls[@]}" --tls-key "$pki/coordinator.crt"

start_coordinator "${tls[@]}" --health-listen 127.0.0.1:0
grep -q "coordinator security: TLS" "$WORK/coordinator.log" || fail "no security line"
! grep -q "WARNING: serving gRPC in plaintext" "$WORK/coordinator.log" || fail "plaintext warning while serving TLS"
health=$(sed -n 's/^coordinator health on \([^ ]*\).*/\1/p' "$WORK/coordinator.log")

# Clients that cannot connect: plaintext, no CA, another CA. Bounded by pipectl's deadline.
expect 1 "not reachable in plaintext" "$PIPECTL" jobs
grep -qF "if it serves TLS, pass --tls-ca FILE" "$WORK/err" || fail "no TLS hint: $(cat "$WORK/err")"
expect 1 "not reachable over TLS with CA $pki/rogue/ca.crt" "$PIPECTL" jobs --tls-ca "$pki/rogue/ca.crt"
expect 2 "--token: needs --tls-ca: a token is only ever sent over TLS" "$PIPECTL" cancel job-000001 --token "$token"
expect 2 "--tls-ca: cannot open $WORK/none.crt: No such file or directory" "$PIPECTL" jobs --tls-ca "$WORK/none.crt"

# With the CA, read-only calls need no token; mutating ones need the right one.
export PIPECOORD_TLS_CA=$pki/ca.crt
"$PIPECTL" jobs > /dev/null || fail "jobs over TLS"
job_json "$WORK/job.json" pp=2 steps=3
expect 1 "pipectl submit: the coordinator at $PIPECOORD_ADDR refused the call: SubmitJob: a bearer token is required" \
  "$PIPECTL" submit "$WORK/job.json"
expect 1 "refused the call: SubmitJob: the bearer token is wrong" "$PIPECTL" submit "$WORK/job.json" --token "${token}0"
expect 1 "refused the call: CancelJob: the bearer token is wrong" \
  env PIPECOORD_TOKEN="$(openssl rand -hex 32)" "$PIPECTL" cancel job-000001
[ "$("$PIPECTL" jobs --format json | json_field '.get("jobs", [])')" = "[]" ] || fail "a refused submit stored a job"

# Workers: mutual TLS, ids from their certificates.
start_tls_worker() {  # start_tls_worker NAME [flags...]
  local name=$1
  shift
  "$WORKER" --coordinator "$PIPECOORD_ADDR" "$@" > "$WORK/worker-$name.log" 2>&1 &
  PIDS+=($!)
}
expect 2 "--tls-cert: required with --tls-ca" "$WORKER" --coordinator "$PIPECOORD_ADDR" --tls-ca "$pki/ca.crt"
expect 2 "--tls-cert: needs --tls-key" "$WORKER" --coordinator "$PIPECOORD_ADDR" --tls-ca "$pki/ca.crt" \
  --tls-cert "$pki/trainer-0.crt"
for i in 0 1; do
  start_tls_worker "$i" --tls-ca "$pki/ca.crt" --tls-cert "$pki/trainer-$i.crt" --tls-key "$pki/trainer-$i.key"
done
# A worker from another CA and a plaintext one never get in (they keep retrying: stopped at exit).
start_tls_worker rogue --tls-ca "$pki/ca.crt" --tls-cert "$pki/rogue/trainer-0.crt" --tls-key "$pki/rogue/trainer-0.key"
start_tls_worker plaintext
for _ in $(seq 100); do
  [ "$("$PIPECTL" workers --format json | json_field '.get("workers", [])' | grep -o trainer- | wc -l)" -ge 2 ] && break
  sleep 0.1
done
"$PIPECTL" workers --format json > "$WORK/workers.json"
/usr/bin/python3 - "$WORK/workers.json" <<'PY' || fail "worker ids are not their certificates' ($(cat "$WORK/workers.json"))"
import json, sys
assert sorted(w["workerId"] for w in json.load(open(sys.argv[1]))["workers"]) == ["trainer-0", "trainer-1"]
PY
# Each log waited for on its own (grep with two files is true once either matches; on a loaded
# machine the second worker's first refusal came after the check).
for name in rogue plaintext; do
  for _ in $(seq 300); do grep -qs "not reachable yet" "$WORK/worker-$name.log" && break; sleep 0.1; done
  grep -q "coordinator not reachable yet" "$WORK/worker-$name.log" || fail "$name worker: $(cat "$WORK/worker-$name.log")"
done

# The wire rules for a client that bypasses the daemon: a certificate binds its holder to one id.
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
hgen=$(dirname "$(dirname "$(dirname "$(readlink -f tests/grpc_protos/health_pb2.py)")")")
PKI=$pki HEALTH=$health PYTHONPATH="$gen:$hgen:python" timeout 60 /usr/bin/python3 - <<'PY' || fail "wire rules"
import os, grpc
from proto import job_pb2, job_pb2_grpc, telemetry_pb2, worker_pb2, worker_pb2_grpc
from tests.grpc_protos import health_pb2, health_pb2_grpc
addr, pki = os.environ["PIPECOORD_ADDR"], os.environ["PKI"]
read = lambda name: open(os.path.join(pki, name), "rb").read()

def stub(cert=None):
    key = read(cert + ".key") if cert else None
    chain = read(cert + ".crt") if cert else None
    channel = grpc.secure_channel(addr, grpc.ssl_channel_credentials(read("ca.crt"), key, chain))
    return worker_pb2_grpc.WorkerServiceStub(channel)

def refused(code, text, call, *args, **kw):
    try:
        call(*args, timeout=10, **kw)
    except grpc.RpcError as e:
        assert e.code() == code and text in e.details(), (call, e.code(), e.details())
        return
    raise SystemExit(f"{call} was accepted")

P, U = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED
other = 'this client certificate is for worker "trainer-1"'
t1 = stub("trainer-1")
register = worker_pb2.RegisterRequest(device_kind="cpu", host="h", data_endpoint="127.0.0.1:9")
refused(P, other, t1.Register, worker_pb2.RegisterRequest(device_kind="cpu", data_endpoint="127.0.0.1:9", worker_id="trainer-0"))
refused(P, other, t1.Heartbeat, worker_pb2.HeartbeatRequest(worker_id="trainer-0"))
refused(P, other, lambda r, **kw: list(t1.KeepAlive(r, **kw)), iter([worker_pb2.HeartbeatRequest(worker_id="trainer-0")]))
refused(P, other, t1.ReportResult, worker_pb2.ReportResultRequest(worker_id="trainer-0", job_id="job-000001", ok=False, message="x"))
refused(P, other, t1.Telemetry, iter([telemetry_pb2.TelemetryBatch(worker_id="trainer-0", job_id="job-000001", rank=0)]))
refused(P, other, t1.Rendezvous, worker_pb2.RendezvousRequest(job_id="job-000001", key="k", expected=1),
        metadata=[("worker-id", "trainer-0")])
refused(P, other, lambda r, **kw: list(t1.Commands(r, **kw)), worker_pb2.CommandsRequest(worker_id="trainer-0"))
# trainer-1's own id is live (its daemon runs): a second holder of the certificate waits.
refused(grpc.StatusCode.FAILED_PRECONDITION, 'worker "trainer-1" is registered already', t1.Register, register)
assert t1.Heartbeat(worker_pb2.HeartbeatRequest(worker_id="trainer-1"), timeout=10).lease_ms > 0
beats = list(t1.KeepAlive(iter([worker_pb2.HeartbeatRequest(worker_id="trainer-1")] * 2), timeout=10))
assert len(beats) == 2 and all(b.lease_ms > 0 for b in beats), beats
# No client certificate: not authenticated; a certificate naming no worker: denied.
none = stub()
refused(U, "a client certificate signed by the coordinator's --tls-ca is required", none.Register, register)
refused(U, "a client certificate", none.Heartbeat, worker_pb2.HeartbeatRequest(worker_id="trainer-0"))
refused(U, "a client certificate", none.Telemetry, iter([]))
refused(U, "a client certificate", lambda r, **kw: list(none.KeepAlive(r, **kw)), iter([]))
refused(P, "names no worker", stub("nameless").Register, register)
# The token is no worker credential, and a worker certificate is no token.
refused(U, "a client certificate", none.Heartbeat, worker_pb2.HeartbeatRequest(worker_id="trainer-0"),
        metadata=[("authorization", "Bearer " + read("token").decode().strip())])
jobs_as_worker = job_pb2_grpc.JobServiceStub(grpc.secure_channel(addr, grpc.ssl_channel_credentials(
    read("ca.crt"), read("trainer-0.key"), read("trainer-0.crt"))))
refused(U, "SubmitJob: a bearer token is required", jobs_as_worker.SubmitJob, job_pb2.SubmitJobRequest())
# The plaintext health port answers grpc.health.v1 and nothing else; the TLS port no plaintext.
plain = grpc.insecure_channel(os.environ["HEALTH"])
assert health_pb2_grpc.HealthStub(plain).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
    health_pb2.HealthCheckResponse.SERVING
refused(grpc.StatusCode.UNIMPLEMENTED, "", job_pb2_grpc.JobServiceStub(plain).ListJobs, job_pb2.ListJobsRequest())
refused(grpc.StatusCode.UNIMPLEMENTED, "", worker_pb2_grpc.WorkerServiceStub(plain).Heartbeat, worker_pb2.HeartbeatRequest())
refused(grpc.StatusCode.UNAVAILABLE, "", health_pb2_grpc.HealthStub(grpc.insecure_channel(addr)).Check,
        health_pb2.HealthCheckRequest())
print("wire rules ok")
PY

# The happy path: TLS + mTLS + token, from pipectl ...
export PIPECOORD_TOKEN=$token
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]') || fail "submit with the token"
timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "watch: $(cat "$WORK/watch.out")"
grep -q "SUCCEEDED" "$WORK/watch.out" || fail "job did not succeed: $(cat "$WORK/watch.out")"
"$PIPECTL" status "$job" --format json | json_field '["workerIds"]' | grep -q "trainer-" || fail "ran on other workers"
# ... and from the Python client (which refuses a token without TLS).
PIPECOORD_PROTO_PATH=$gen timeout 120 /usr/bin/python3 python/examples/submit_and_follow.py "$WORK/job.json" \
  > "$WORK/example.out" || fail "python example over TLS: $(cat "$WORK/example.out")"
grep -q "ended SUCCEEDED after 3 steps" "$WORK/example.out" || fail "$(cat "$WORK/example.out")"
PKI=$pki PYTHONPATH="$gen:python" timeout 60 /usr/bin/python3 - <<'PY' || fail "python client"
import os
from pipecoord import Client, Unauthenticated
addr, pki = os.environ["PIPECOORD_ADDR"], os.environ["PKI"]
ca = open(os.path.join(pki, "ca.crt"), "rb").read()
try:
    Client(addr, token=os.environ["PIPECOORD_TOKEN"])
    raise SystemExit("a token without TLS was accepted")
except ValueError as e:
    assert "only ever sent over TLS" in str(e), e
with Client(addr, root_certificates=ca) as anonymous:
    assert len(anonymous.jobs()) == 2
    try:
        anonymous.cancel("job-000001")
        raise SystemExit("cancel without a token was accepted")
    except Unauthenticated as e:
        assert e.code == "UNAUTHENTICATED", e
with Client(addr, token=os.environ["PIPECOORD_TOKEN"], root_certificates=ca) as c:
    pending = c.submit({"name": "never-runs", "schedule": "1f1b", "pp": 8, "microbatches": 8, "microBatchSize": 1, "steps": 1,
                        "model": {"layers": 8, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8}})
    assert c.cancel(pending) == "CANCELLED"
print("python client ok")
PY
# A cancel with the token from pipectl.
job3=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
"$PIPECTL" cancel "$job3" > /dev/null || fail "cancel with the token"
echo "e2e security: ok"
