#!/usr/bin/env bash
# The Python client's example runs against real processes; and the wire rules hold for a client
# that bypasses pipectl (a worker reporting for a rank it does not hold: PERMISSION_DENIED).
source tests/lib.sh
start_coordinator
start_workers 2
job_json "$WORK/job.json" steps=3
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
PIPECOORD_PROTO_PATH=$gen /usr/bin/python3 python/examples/submit_and_follow.py "$WORK/job.json" > "$WORK/example.out" \
  || fail "example failed: $(cat "$WORK/example.out")"
grep -q "step 3: loss" "$WORK/example.out" || fail "no step lines: $(cat "$WORK/example.out")"
grep -q "ended SUCCEEDED after 3 steps" "$WORK/example.out" || fail "$(cat "$WORK/example.out")"

PYTHONPATH="$gen:python" /usr/bin/python3 - <<'PY' || fail "wire rules"
import os, grpc
from pipecoord import Client
from proto import job_pb2, telemetry_pb2, worker_pb2, worker_pb2_grpc
addr = os.environ["PIPECOORD_ADDR"]
channel = grpc.insecure_channel(addr)
workers = worker_pb2_grpc.WorkerServiceStub(channel)
me = workers.Register(worker_pb2.RegisterRequest(device_kind="cpu", host="t", data_endpoint="127.0.0.1:9"))
try:
    workers.Telemetry(iter([telemetry_pb2.TelemetryBatch(worker_id=me.worker_id, job_id="job-000001", rank=0)]))
    raise SystemExit("telemetry for a rank not held was accepted")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
    assert "does not hold rank 0" in e.details(), e.details()
try:
    workers.Register(worker_pb2.RegisterRequest(device_kind="tpu", data_endpoint="127.0.0.1:9"))
    raise SystemExit("bad device accepted")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
with Client(addr) as c:
    try:
        c.submit({"pp": 0})
        raise SystemExit("bad spec accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and e.details() == "spec.model: required", e
    try:
        c.get("job-777")
        raise SystemExit("unknown job found")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, e
    # A message over the coordinator's 64 MiB limit is refused without harming stored jobs.
    before = len(c.jobs())
    try:
        c.submit(job_pb2.JobSpec(name="x", schedule="csv", csv_schedule="0F0," * (70 << 18)))
        raise SystemExit("oversized message accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
    assert len(c.jobs()) == before
    assert c.get("job-000001").state == job_pb2.SUCCEEDED
print("wire rules ok")
PY
echo "python client: ok"
