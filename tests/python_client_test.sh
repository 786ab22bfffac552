#!/usr/bin/env bash
# The Python client against real processes: its example and docs/usage.md's example run; job
# states read as names; every error is a typed PipecoordError (never a raw grpc.RpcError); watch
# yields StepUpdate, EventUpdate and StateUpdate in order. And the wire rules hold for a client
# that bypasses pipectl (a worker reporting for a rank it does not hold: PERMISSION_DENIED).
source tests/lib.sh
start_coordinator
start_workers 2
job_json "$WORK/job.json" steps=3
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")

# 1. The example (job-000001): a line per event, state change and step, then the end.
PIPECOORD_PROTO_PATH=$gen /usr/bin/python3 python/examples/submit_and_follow.py "$WORK/job.json" > "$WORK/example.out" \
  || fail "example failed: $(cat "$WORK/example.out")"
PIPECOORD_PROTO_PATH=$gen /usr/bin/python3 - "$WORK/example.out" <<'PY' || fail "example output: $(cat "$WORK/example.out")"
import re, sys
# Health events depend on timing (a 2-core machine under load starves ranks): not checked here.
health = re.compile(r"job-000001 \[(bubble|straggler|hang|memory|sdc)\] ")
lines = [l for l in open(sys.argv[1]).read().splitlines() if not health.match(l)]
expected = [r"submitted job-000001",
            r"job-000001 \[lifecycle\] submitted: 1f1b, pp 2, dp 1, waiting for 2 worker\(s\)",
            r"job-000001 is PENDING",
            r"job-000001 \[lifecycle\] running on 2 worker\(s\)",
            r"job-000001 is RUNNING"]
expected += [rf"job-000001 step {n}: loss \d+\.\d{{4}}, \d+\.\d{{3}} s, bubble \d\.\d{{3}} \(predicted \d\.\d{{3}}\)"
             for n in (1, 2, 3)]
expected += [r"job-000001 \[lifecycle\] SUCCEEDED", r"job-000001 is SUCCEEDED",
             r"job-000001 ended SUCCEEDED after 3 steps"]
assert len(lines) == len(expected), lines
for line, pattern in zip(lines, expected):
    assert re.fullmatch(pattern, line), (line, pattern)
PY
# A file that cannot be read: exit 2 and the typed error's words, no traceback.
rc=0
PIPECOORD_PROTO_PATH=$gen /usr/bin/python3 python/examples/submit_and_follow.py "$WORK/none.json" > /dev/null 2> "$WORK/none.err" || rc=$?
[ "$rc" = 2 ] || fail "example on a missing file: exit $rc"
[ "$(cat "$WORK/none.err")" = "submit_and_follow: cannot open $WORK/none.json: No such file or directory (INVALID_ARGUMENT)" ] \
  || fail "example on a missing file: $(cat "$WORK/none.err")"

# 2. docs/usage.md's example (job-000002), as written but for the address: its output has the
#    shape of the output the docs show (digits aside).
/usr/bin/python3 - docs/usage.md "$WORK/doc_example.py" "$WORK/doc_example.expected" <<'PY' || fail "docs example not found"
import os, sys
text = open(sys.argv[1]).read()
section = text[text.index("## The Python client"):]
code = section[section.index("```python\n") + len("```python\n"):]
code = code[:code.index("```")]
shown = section[section.index("```text\n") + len("```text\n"):]
shown = shown[:shown.index("```")]
assert '"127.0.0.1:50051"' in code, code
open(sys.argv[2], "w").write(code.replace('"127.0.0.1:50051"', repr(os.environ["PIPECOORD_ADDR"])))
open(sys.argv[3], "w").write(shown)
PY
PYTHONPATH="$gen:python" timeout 120 /usr/bin/python3 "$WORK/doc_example.py" > "$WORK/doc_example.out" 2>&1 \
  || fail "docs example failed: $(cat "$WORK/doc_example.out")"
/usr/bin/python3 - "$WORK/doc_example.out" "$WORK/doc_example.expected" <<'PY' || fail "docs example output differs"
import re, sys
digits = lambda s: re.sub(r"\d+", "N", s)
health = re.compile(r"^\[(bubble|straggler|hang|memory|sdc)\] .*\n", re.M)  # timing-dependent, as the docs say
got, shown = (health.sub("", open(p).read()) for p in sys.argv[1:3])
if digits(got) != digits(shown):
    sys.exit(f"--- docs show\n{shown}--- it printed\n{got}")
PY

# 3. The client's API over the wire.
PYTHONPATH="$gen:python" timeout 180 /usr/bin/python3 - "$WORK" <<'PY' || fail "python client"
import json, math, os, socket, sys
import grpc
import pipecoord
from pipecoord import (Client, EventUpdate, FailedPrecondition, InvalidArgument, Job, JobFailed, NotFound,
                       PermissionDenied, PipecoordError, ResourceExhausted, StateUpdate, StepUpdate,
                       Unauthenticated, Unavailable, state_name, typed_updates)
from proto import health_pb2, job_pb2, telemetry_pb2, worker_pb2, worker_pb2_grpc

addr, work = os.environ["PIPECOORD_ADDR"], sys.argv[1]
SPEC = {"name": "py", "schedule": "1f1b", "pp": 2, "microbatches": 4, "microBatchSize": 2, "steps": 3,
        "learningRate": 0.01, "model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "3"}}

def raises(cls, call, *args):
    """Calls; returns the error, which must be exactly cls (typed, never a raw grpc error)."""
    try:
        call(*args)
    except Exception as e:  # noqa: BLE001 (the point is which type it is)
        assert type(e) is cls, f"{call.__name__}{args}: {type(e).__name__}: {e}"
        assert isinstance(e, PipecoordError) and not isinstance(e, grpc.RpcError), type(e).__mro__
        assert str(e) == e.message, (str(e), e.message)
        return e
    raise SystemExit(f"{call.__name__}{args} did not raise {cls.__name__}")

def field_named(message, snake, camel):
    """A coordinator message about spec.<field>: snake_case today, the JSON name after issue 13."""
    return message.startswith(f"spec.{snake}: ") or message.startswith(f"spec.{camel}: ")

with Client(addr) as c:
    # State names: Job wraps the message; .proto is the raw one.
    job = c.get("job-000001")
    assert isinstance(job, Job) and job.state == "SUCCEEDED", job
    assert job.id == "job-000001" and job.steps_done == 3 and job.failed_rank is None and job.failure_cause == "", job
    assert isinstance(job.proto, job_pb2.Job) and job.proto.state == job_pb2.SUCCEEDED == 3
    assert job.spec.steps == 3 and len(job.steps) == 3 and job.worker_ids == job.proto.worker_ids  # read through
    assert state_name(job.proto) == "SUCCEEDED" and state_name(job_pb2.CANCELLED) == "CANCELLED"
    assert [j.state for j in c.jobs()] == ["SUCCEEDED", "SUCCEEDED"], c.jobs()
    assert [j.id for j in c.jobs()] == ["job-000001", "job-000002"]
    assert pipecoord.TERMINAL_STATES == ("SUCCEEDED", "FAILED", "CANCELLED")

    # InvalidArgument: the coordinator's message, naming the spec field.
    e = raises(InvalidArgument, c.submit, dict(SPEC, steps=0))
    assert e.code == "INVALID_ARGUMENT" and field_named(e.message, "steps", "steps") and "got 0" in e.message, e.message
    e = raises(InvalidArgument, c.submit, dict(SPEC, microBatchSize=0))
    assert field_named(e.message, "micro_batch_size", "microBatchSize"), e.message
    e = raises(InvalidArgument, c.submit, {"pp": 0})
    assert e.message.startswith("spec.model: ") and "required" in e.message, e.message
    # ... and in the client, before anything is sent: a repeated key (JSON text or file), a value
    # of the wrong type or an unknown field (protobuf's ParseError), a file that cannot be read.
    before = len(c.jobs())
    dup = '{"name": "dup", "steps": 3, "model": {"layers": 4, "hidden": 32, "hidden": 64}}'
    e = raises(InvalidArgument, c.submit, dup)
    assert e.message == "spec.model.hidden: duplicate key", e.message
    path = os.path.join(work, "dup.json")
    open(path, "w").write('{"steps": 3,\n "steps": 4}')
    e = raises(InvalidArgument, c.submit, path)
    assert e.message == f"{path}: spec.steps: duplicate key", e.message
    e = raises(InvalidArgument, c.submit, dict(SPEC, steps="three"))
    assert e.message == 'spec.steps: expected an integer, got "three"', e.message
    e = raises(InvalidArgument, c.submit, dict(SPEC, stageLayers=[2, "x"]))
    assert e.message == 'spec.stageLayers[1]: expected an integer, got "x"', e.message
    e = raises(InvalidArgument, c.submit, dict(SPEC, model={"layers": 4, "hiddn": 32}))
    assert e.message.startswith("spec.model.hiddn: unknown field (ModelSpec has layers, hidden, "), e.message
    e = raises(InvalidArgument, c.submit, dict(SPEC, steps=1 << 40))
    assert e.message == "spec.steps: 1.09951e+12 is out of range (int32)", e.message
    e = raises(InvalidArgument, c.submit, '{"steps": ')
    assert e.message == "spec: not JSON: Expecting value at line 1 column 11", e.message
    e = raises(InvalidArgument, c.submit, os.path.join(work, "none.json"))
    assert e.message == f"cannot open {work}/none.json: No such file or directory", e.message
    assert len(c.jobs()) == before
    # The same spec as JSON text, as a file and as a dict: the same JobSpec.
    path = os.path.join(work, "spec.json")
    open(path, "w").write(json.dumps(SPEC))
    assert pipecoord.load_spec(json.dumps(SPEC)) == pipecoord.load_spec(path) == pipecoord.load_spec(SPEC)

    # NotFound from every call that names a job (watch raises when iterated).
    for call in (c.get, c.cancel, c.wait, lambda job_id: list(c.watch(job_id))):
        e = raises(NotFound, call, "job-777")
        assert e.code == "NOT_FOUND" and "job-777" in e.message, e.message

    # ResourceExhausted: a message over the coordinator's 64 MiB limit, stored jobs unharmed.
    e = raises(ResourceExhausted, c.submit, job_pb2.JobSpec(name="x", schedule="csv", csv_schedule="0F0," * (70 << 18)))
    assert e.code == "RESOURCE_EXHAUSTED", e
    assert len(c.jobs()) == before and c.get("job-000001").state == "SUCCEEDED"

    # JobFailed: a job that cannot start (pp 8 on 2 workers) is cancelled; wait reports it.
    pending = c.submit(dict(SPEC, name="never-runs", pp=8, microbatches=8, model=dict(SPEC["model"], layers=8)))
    assert c.get(pending).state == "PENDING"
    assert c.cancel(pending) == "CANCELLED" and c.cancel(pending) == "CANCELLED"
    e = raises(JobFailed, c.wait, pending)
    assert (e.job_id, e.state, e.code, e.cause, e.failed_rank) == (pending, "CANCELLED", "CANCELLED", "cancelled by the user", None), e
    assert e.message == f"{pending} ended CANCELLED: cancelled by the user" and e.job.state == "CANCELLED", e.message

    # watch: a job with its health checks off (no timing-dependent events), followed live.
    job_id = c.submit(dict(SPEC, name="watched", health={"disabled": True}))
    updates = list(c.watch(job_id))
    kinds = [type(u).__name__ for u in updates]
    assert kinds == ["EventUpdate", "StateUpdate", "EventUpdate", "StateUpdate", "StepUpdate", "StepUpdate",
                     "StepUpdate", "EventUpdate", "StateUpdate"], [(type(u).__name__, u) for u in updates]
    events = [u for u in updates if isinstance(u, EventUpdate)]
    assert events[0].message.startswith("submitted: 1f1b, pp 2, dp 1"), events[0]
    assert [e.message for e in events[1:]] == ["running on 2 worker(s)", "SUCCEEDED"], events
    assert all(e.kind == "LIFECYCLE" and e.rank is None and e.dp_rank is None and e.step is None and e.unix_ms > 0
               for e in events), events
    assert [u.state for u in updates if isinstance(u, StateUpdate)] == ["PENDING", "RUNNING", "SUCCEEDED"]
    assert isinstance(updates[-1], StateUpdate) and updates[-1].state == "SUCCEEDED"
    steps = [u for u in updates if isinstance(u, StepUpdate)]
    final = c.wait(job_id)
    assert final.state == "SUCCEEDED" and final.steps_done == 3, final
    assert [s.step for s in steps] == [0, 1, 2], steps
    for s, record in zip(steps, final.steps):
        assert (s.loss, s.step_time_s, s.measured_bubble_rate) == (record.loss, record.step_time_s,
                                                                   record.measured_bubble_rate), (s, record)
        assert math.isfinite(s.loss) and s.loss > 0 and s.step_time_s > 0, s
        assert s.predicted_bubble_rate == final.plan.predicted_bubble_rate > 0, s
    assert isinstance(steps[0].proto, job_pb2.JobUpdate) and steps[0].proto.step == 0
    # A consumer may stop early: the stream is cancelled and the client stays usable.
    first = next(iter(c.watch(job_id)))
    assert isinstance(first, EventUpdate) and first.message.startswith("submitted: "), first
    assert c.get(job_id).state == "SUCCEEDED"

# How each update is recognised, on hand-made JobUpdates (the rules docs/usage.md states): an
# event (message or HealthEvent) -> EventUpdate; else any step field set -> StepUpdate (step 0
# with a loss counts); then a StateUpdate when the state differs from the previous update's.
U = job_pb2.JobUpdate
made = list(typed_updates([
    U(state=job_pb2.RUNNING, event="legacy event"),
    U(state=job_pb2.RUNNING, step=0, loss=4.5, step_time_s=0.25),
    U(state=job_pb2.RUNNING, event="straggler: rank 1", health_event=health_pb2.HealthEvent(
        kind=health_pb2.STRAGGLER, rank=1, dp_rank=0, step=0, message="straggler: rank 1", unix_ms=7)),
    U(state=job_pb2.FAILED),
]))
assert [type(u).__name__ for u in made] == ["EventUpdate", "StateUpdate", "StepUpdate", "EventUpdate", "StateUpdate"], made
assert (made[0].kind, made[0].message, made[0].rank, made[0].step) == ("EVENT_KIND_UNSPECIFIED", "legacy event", None, None)
assert (made[2].step, made[2].loss, made[2].step_time_s) == (0, 4.5, 0.25), made[2]
assert (made[3].kind, made[3].rank, made[3].dp_rank, made[3].step, made[3].unix_ms) == ("STRAGGLER", 1, 0, 0, 7), made[3]
assert [made[1].state, made[4].state] == ["RUNNING", "FAILED"]

# Every status code maps to its class (the ones no JobService call answers today, too).
from pipecoord.client import _from_rpc_error
class FakeError(grpc.RpcError):
    def __init__(self, code, details): self._c, self._d = code, details
    def code(self): return self._c
    def details(self): return self._d
S = grpc.StatusCode
for code, cls in [(S.INVALID_ARGUMENT, InvalidArgument), (S.NOT_FOUND, NotFound), (S.FAILED_PRECONDITION, FailedPrecondition),
                  (S.UNAUTHENTICATED, Unauthenticated), (S.PERMISSION_DENIED, PermissionDenied),
                  (S.RESOURCE_EXHAUSTED, ResourceExhausted), (S.UNAVAILABLE, Unavailable), (S.INTERNAL, PipecoordError)]:
    e = _from_rpc_error(FakeError(code, "why"))
    assert type(e) is cls and e.code == code.name and e.message == "why", (code, e)

# Unavailable: nothing listens on the port.
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
with Client(f"127.0.0.1:{port}", timeout_s=5) as dead:
    e = raises(Unavailable, dead.jobs)
    assert e.code == "UNAVAILABLE" and e.message, e
    raises(Unavailable, lambda: list(dead.watch("job-000001")))

# The wire rules for a client that bypasses pipectl and this client (raw stubs, raw errors).
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
print("python client ok")
PY
echo "python client: ok"
