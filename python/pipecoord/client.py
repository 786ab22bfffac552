"""The Python client: submit, get, jobs, cancel, watch and wait over the generated JobService stub.

Beyond the stubs it gives three things (docs/usage.md, "The Python client"):
- Jobs with state names: get() and jobs() return Job, whose .state is "PENDING", "RUNNING",
  "SUCCEEDED", "FAILED" or "CANCELLED"; Job.proto is the raw job_pb2.Job.
- Typed errors: every method raises a PipecoordError subclass (never a raw grpc.RpcError) whose
  .code names the gRPC status and whose .message is the coordinator's own (it names the field).
- Typed updates: watch() yields StepUpdate, EventUpdate and StateUpdate.
"""
import dataclasses
import json
import os
import time
from typing import Optional

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from pipecoord.coordinator_target import coordinator_target
from proto import health_pb2, job_pb2, job_pb2_grpc

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


def state_name(value):
    """The name of a job state: "PENDING", "RUNNING", "SUCCEEDED", "FAILED" or "CANCELLED".

    value is a JobState number or any message with a `state` field (job_pb2.Job, JobUpdate,
    CancelJobResponse). A number this client's protos do not know reads "JOB_STATE_<n>"."""
    number = value if isinstance(value, int) else value.state
    try:
        return job_pb2.JobState.Name(number)
    except ValueError:
        return f"JOB_STATE_{number}"


def _event_kind_name(number):
    try:
        return health_pb2.EventKind.Name(number)
    except ValueError:
        return f"EVENT_KIND_{number}"


def _rank_or_none(value):
    """The protos' -1 ("not about one rank/step") as None."""
    return None if value < 0 else value


# ---------------------------------------------------------------------------------------------
# Errors

class PipecoordError(Exception):
    """Every error this client raises. .code: the gRPC status code's name ("INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", ...; for JobFailed the job's final state); .message: what went wrong, in
    the coordinator's words when it answered (str(error) is the message)."""

    CODE = "UNKNOWN"

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code or self.CODE

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidArgument(PipecoordError):
    """A bad request: a JobSpec field out of its rules (the message names it: "spec.steps: ..."),
    JSON that does not parse or repeats a key, a file that cannot be opened."""
    CODE = "INVALID_ARGUMENT"


class NotFound(PipecoordError):
    """No job with that id."""
    CODE = "NOT_FOUND"


class FailedPrecondition(PipecoordError):
    """The request does not fit the job's current state."""
    CODE = "FAILED_PRECONDITION"


class Unauthenticated(PipecoordError):
    """The coordinator wants its bearer token (Client(token=...)) for this call."""
    CODE = "UNAUTHENTICATED"


class PermissionDenied(PipecoordError):
    """The caller is known but not allowed to do this."""
    CODE = "PERMISSION_DENIED"


class ResourceExhausted(PipecoordError):
    """Over a limit: the message size (64 MiB), or --max-jobs live jobs stored."""
    CODE = "RESOURCE_EXHAUSTED"


class Unavailable(PipecoordError):
    """The coordinator cannot be reached (or is shutting down)."""
    CODE = "UNAVAILABLE"


class JobFailed(PipecoordError):
    """A waited-for job ended FAILED or CANCELLED. .job_id, .state ("FAILED" or "CANCELLED"),
    .cause (the recorded cause; for a cancel, the cancel's reason), .failed_rank (the rank that
    caused it, None when no one rank did) and .job (the final Job). .code is .state."""

    def __init__(self, job_id, state, cause="", failed_rank=None, job=None):
        super().__init__(f"{job_id} ended {state}" + (f": {cause}" if cause else ""), code=state)
        self.job_id = job_id
        self.state = state
        self.cause = cause
        self.failed_rank = failed_rank
        self.job = job


_ERROR_BY_CODE = {cls.CODE: cls for cls in (InvalidArgument, NotFound, FailedPrecondition, Unauthenticated,
                                             PermissionDenied, ResourceExhausted, Unavailable)}


def _from_rpc_error(error):
    """The typed error for a grpc.RpcError (code and details of the failed call)."""
    code = error.code() if callable(getattr(error, "code", None)) else None
    details = error.details() if callable(getattr(error, "details", None)) else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    return _ERROR_BY_CODE.get(name, PipecoordError)(details or name, code=name)


# ---------------------------------------------------------------------------------------------
# Jobs and updates

@dataclasses.dataclass(frozen=True)
class Job:
    """A job as get() and jobs() return it. .state is its name; other fields of the message read
    through to it unchanged (job.spec, job.steps, job.events, job.worker_ids, job.plan, ...);
    .proto is the raw job_pb2.Job (its .state the number)."""
    id: str
    state: str
    steps_done: int
    failure_cause: str           # set when FAILED
    failed_rank: Optional[int]   # the rank that caused a failure; None when no one rank did
    proto: job_pb2.Job = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, job):
        failed = job.failed_rank if job.state == job_pb2.FAILED else -1
        return cls(id=job.id, state=state_name(job.state), steps_done=job.steps_done,
                   failure_cause=job.failure_cause, failed_rank=_rank_or_none(failed), proto=job)

    @property
    def auto_plan(self):
        """Why a schedule "auto" job runs the strategy it runs (job_pb2.AutoPlanReport: chosen,
        next_best, candidates, feasible, pruned_for_memory, pruned, ...); None for any other job.
        job.spec holds the strategy as it runs."""
        return self.proto.auto_plan if self.proto.HasField("auto_plan") else None

    def __getattr__(self, name):
        if name.startswith("_") or name == "proto":
            raise AttributeError(name)
        return getattr(self.proto, name)


@dataclasses.dataclass(frozen=True)
class DryRun:
    """What submit(spec, dry_run=True) answers: the job as it would run, nothing stored or started.
    spec: the JobSpec with defaults applied and schedule "auto" resolved; auto_plan: the
    AutoPlanReport for schedule "auto" (None otherwise); the plan's predicted bubble rate and
    makespan (cost units); .proto is the SubmitJobResponse."""
    spec: job_pb2.JobSpec
    auto_plan: Optional[job_pb2.AutoPlanReport]
    predicted_bubble_rate: float
    predicted_makespan: float
    proto: job_pb2.SubmitJobResponse = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, response):
        return cls(spec=response.spec, auto_plan=response.auto_plan if response.HasField("auto_plan") else None,
                   predicted_bubble_rate=response.predicted_bubble_rate,
                   predicted_makespan=response.predicted_makespan, proto=response)


@dataclasses.dataclass(frozen=True)
class StepUpdate:
    """A finished step, as measured. step counts from 0; .proto is the JobUpdate."""
    step: int
    loss: float
    step_time_s: float
    measured_bubble_rate: float
    predicted_bubble_rate: float
    # The step's global gradient norm before clipping (None: the backend does not compute it)
    # and its learning rate.
    grad_norm: Optional[float]
    learning_rate: float
    proto: job_pb2.JobUpdate = dataclasses.field(repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class EventUpdate:
    """A lifecycle or health event (docs/monitoring.md). kind: "LIFECYCLE", "BUBBLE", "STRAGGLER",
    "HANG", "MEMORY" or "SDC"; rank, dp_rank and step are None when the event is not about one."""
    kind: str
    message: str
    rank: Optional[int]
    dp_rank: Optional[int]
    step: Optional[int]
    unix_ms: int
    proto: job_pb2.JobUpdate = dataclasses.field(repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class StateUpdate:
    """The job's state changed to .state (a name, as Job.state)."""
    state: str
    proto: job_pb2.JobUpdate = dataclasses.field(repr=False, compare=False)


def _is_event(update):
    return bool(update.event) or update.HasField("health_event")


def _has_step(update):
    return bool(update.step or update.loss or update.step_time_s or update.measured_bubble_rate)


def typed_updates(updates):
    """The typed updates for a stream of JobUpdate messages (watch() uses it). For each JobUpdate:
    1. with `event` or `health_event` set, an EventUpdate;
    2. otherwise, when it carries a step record (any of step, loss, step_time_s,
       measured_bubble_rate non-zero), a StepUpdate;
    3. then, when its state differs from the previous JobUpdate's (the first one's always does),
       a StateUpdate with the new state."""
    previous = None
    for update in updates:
        if _is_event(update):
            e = update.health_event
            has_event = update.HasField("health_event")
            yield EventUpdate(kind=_event_kind_name(e.kind), message=update.event or e.message,
                              rank=_rank_or_none(e.rank) if has_event else None,
                              dp_rank=_rank_or_none(e.dp_rank) if has_event else None,
                              step=_rank_or_none(e.step) if has_event else None,
                              unix_ms=e.unix_ms, proto=update)
        elif _has_step(update):
            yield StepUpdate(step=update.step, loss=update.loss, step_time_s=update.step_time_s,
                             measured_bubble_rate=update.measured_bubble_rate,
                             predicted_bubble_rate=update.predicted_bubble_rate,
                             grad_norm=update.grad_norm if update.has_grad_norm else None,
                             learning_rate=update.learning_rate, proto=update)
        if update.state != previous:
            previous = update.state
            yield StateUpdate(state=state_name(update.state), proto=update)


def _end_cause(job):
    """Why a job ended: its failure cause, or the reason its final lifecycle event gives
    ("CANCELLED: cancelled by the user")."""
    if job.failure_cause:
        return job.failure_cause
    state = state_name(job.state)
    for event in reversed(job.events):
        if event.message.startswith(state):
            rest = event.message[len(state):]
            return rest[2:] if rest.startswith(": ") else rest.strip()
    return ""


# ---------------------------------------------------------------------------------------------
# JobSpec input: a message, a dict, JSON text or a JSON file

def _echo(value):
    """A value as an error message shows it: numbers in %g, the rest as JSON, cut at 60 chars."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


class _Pairs(dict):
    """A parsed JSON object that remembers the first repeated key inside it (its path)."""
    duplicate = None


def _refuse_duplicates(pairs):
    """object_pairs_hook: keeps the path of the first key given twice (innermost objects are
    built first, so each level prefixes its key: "model.hidden", "stageLayers[0].x")."""
    obj = _Pairs()
    for key, value in pairs:
        if obj.duplicate is None:
            if key in obj:
                obj.duplicate = key
            else:
                inner = _duplicate_in(value)
                if inner is not None:
                    obj.duplicate = key + inner
        obj[key] = value
    return obj


def _duplicate_in(value):
    if isinstance(value, _Pairs) and value.duplicate is not None:
        return "." + value.duplicate
    if isinstance(value, list):
        for i, item in enumerate(value):
            inner = _duplicate_in(item)
            if inner is not None:
                return f"[{i}]{inner}"
    return None


def _parse_json(text, path=None):
    """A dict from JSON text, refusing a key given twice. path: the file it came from, if any."""
    try:
        spec = json.loads(text, object_pairs_hook=_refuse_duplicates)
    except json.JSONDecodeError as e:
        raise InvalidArgument(f"{path or 'spec'}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if isinstance(spec, _Pairs) and spec.duplicate is not None:
        raise InvalidArgument(f"spec.{spec.duplicate}: duplicate key")
    return spec


_INT_TYPES = {FieldDescriptor.CPPTYPE_INT32: "int32", FieldDescriptor.CPPTYPE_INT64: "int64",
              FieldDescriptor.CPPTYPE_UINT32: "uint32", FieldDescriptor.CPPTYPE_UINT64: "uint64"}


def _scalar_reason(field, value, error):
    if field.cpp_type in _INT_TYPES:
        if "out of range" in str(error).lower():
            return f"{_echo(value)} is out of range ({_INT_TYPES[field.cpp_type]})"
        return f"expected an integer, got {_echo(value)}"
    if field.cpp_type in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        return f"expected a number, got {_echo(value)}"
    if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return f"expected true or false, got {_echo(value)}"
    if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        names = ", ".join(v.name for v in field.enum_type.values)
        return f"expected one of {names}, got {_echo(value)}"
    if field.type == FieldDescriptor.TYPE_BYTES:
        return f"expected base64 text, got {_echo(value)}"
    return f"expected a string, got {_echo(value)}"


def _is_plain_message(field):
    return (field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE and not field.message_type.GetOptions().map_entry
            and not field.message_type.full_name.startswith("google.protobuf."))


def _check_dict(value, message, path):
    """Walks a dict against a message type so that a bad field is named by its path as written
    ("spec.model.hiddn", "spec.stageLayers[1]"); protobuf's ParseError names neither well."""
    if not isinstance(value, dict):
        raise InvalidArgument(f"{path}: expected a JSON object, got {_echo(value)}")
    fields = {}
    for f in message.DESCRIPTOR.fields:
        fields[f.name] = f
        fields[f.json_name] = f
    for key, item in value.items():
        field = fields.get(key)
        where = f"{path}.{key}"
        if field is None:
            known = ", ".join(f.json_name for f in message.DESCRIPTOR.fields)
            raise InvalidArgument(f"{where}: unknown field ({message.DESCRIPTOR.name} has {known})")
        if item is None:
            continue
        repeated = field.label == FieldDescriptor.LABEL_REPEATED and not (
            field.message_type is not None and field.message_type.GetOptions().map_entry)
        if repeated and not isinstance(item, list):
            raise InvalidArgument(f"{where}: expected a JSON array, got {_echo(item)}")
        elements = list(enumerate(item)) if repeated else [(None, item)]
        for i, element in elements:
            at = where if i is None else f"{where}[{i}]"
            if _is_plain_message(field):
                holder = type(message)()
                sub = getattr(holder, field.name).add() if repeated else getattr(holder, field.name)
                _check_dict(element, type(sub)(), at)
                continue
            try:
                json_format.ParseDict({key: [element] if repeated else element}, type(message)())
            except json_format.ParseError as e:
                raise InvalidArgument(f"{at}: {_scalar_reason(field, element, e)}") from None


def _spec_from_dict(spec):
    _check_dict(spec, job_pb2.JobSpec(), "spec")
    try:
        return json_format.ParseDict(spec, job_pb2.JobSpec())
    except json_format.ParseError as e:  # not expected after the walk; still a bad spec
        raise InvalidArgument(f"spec: {e}") from None


def load_spec(spec):
    """A JobSpec from what submit() takes: a job_pb2.JobSpec (as is); a dict in protobuf's JSON
    mapping; JSON text (a str or bytes whose first non-blank character is "{" or "["); or the
    path of a JSON file (any other str, or an os.PathLike). Raises InvalidArgument naming the
    field for a bad one ("spec.model.hidden: ..."), a key given twice ("spec.steps: duplicate
    key") or JSON that does not parse; errors about a file's content start with "FILE: ", and one
    that cannot be read says "cannot open FILE: reason"."""
    if isinstance(spec, job_pb2.JobSpec):
        return spec
    if isinstance(spec, dict):
        return _spec_from_dict(spec)
    if isinstance(spec, bytes):
        spec = spec.decode("utf-8", errors="replace")
    if isinstance(spec, str) and spec.lstrip()[:1] in ("{", "["):
        return _spec_from_dict(_parse_json(spec))
    if isinstance(spec, (str, os.PathLike)):
        path = os.fspath(spec)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise InvalidArgument(f"cannot open {path}: {reason}") from None
        try:
            return _spec_from_dict(_parse_json(text, path))
        except InvalidArgument as e:
            if e.message.startswith(path + ": "):
                raise
            raise InvalidArgument(f"{path}: {e.message}") from None
    raise TypeError(f"spec: expected a JobSpec, a dict, JSON text or a file path, got {type(spec).__name__}")


# ---------------------------------------------------------------------------------------------
# The client

class Client:
    """A connection to the coordinator's JobService.

    Without root_certificates the channel is plaintext (a local development coordinator). With
    them (the PEM CA that signed the coordinator's certificate, bytes or str) it is TLS; token
    is then sent as "authorization: Bearer TOKEN" on every call, as submit and cancel need it.
    A token without root_certificates is refused: it is only ever sent over TLS.
    Every unary call has a deadline of timeout_s seconds; watch() has none.
    """

    def __init__(self, address, timeout_s=30.0, *, token=None, root_certificates=None):
        # HOST:PORT, or HOST:PORT,HOST:PORT,... for the coordinators of a high-availability group.
        target, options = coordinator_target(address, "address")
        # Several coordinators (HOST:PORT,HOST:PORT,...): a failover may be under way when a watch
        # starts, so its first connection may be refused too, and is retried as a broken one is.
        self._several = "," in str(address)
        if root_certificates is None:
            if token:
                raise ValueError("token: needs root_certificates: a token is only ever sent over TLS")
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            if isinstance(root_certificates, str):
                root_certificates = root_certificates.encode()
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            if token:
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(token))
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._stub = job_pb2_grpc.JobServiceStub(self._channel)
        self._timeout = timeout_s

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout)
        except grpc.RpcError as e:
            raise _from_rpc_error(e) from None

    def submit(self, spec, dry_run=False):
        """Submits a job; returns its id. spec: a JobSpec message, a dict in protobuf's JSON
        mapping, JSON text, or a JSON file's path (load_spec). With schedule "auto" the coordinator
        chooses the strategy for the workers free now (Job.auto_plan says why). dry_run=True plans
        only and returns a DryRun (the spec as it would run and, for "auto", the report); nothing
        is stored or started. Raises InvalidArgument naming the field for a bad spec,
        FailedPrecondition when "auto" finds no free worker or nothing that fits their memory,
        Unauthenticated without the coordinator's token (when it has one), ResourceExhausted over
        the message size or job limit."""
        request = job_pb2.SubmitJobRequest(spec=load_spec(spec), dry_run=dry_run)
        response = self._call(self._stub.SubmitJob, request)
        return DryRun.from_proto(response) if dry_run else response.job_id

    def get(self, job_id):
        """The Job (NotFound for an unknown id)."""
        return Job.from_proto(self._call(self._stub.GetJob, job_pb2.GetJobRequest(job_id=job_id)))

    def jobs(self):
        """Every job the coordinator keeps, oldest first, as Job."""
        return [Job.from_proto(j) for j in self._call(self._stub.ListJobs, job_pb2.ListJobsRequest()).jobs]

    def workers(self):
        """The registered workers (job_pb2.WorkerInfo): a worker holding a job lists its job_id
        (closing: its part is over and it is closing the job's links); a free one lists none."""
        return list(self._call(self._stub.ListWorkers, job_pb2.ListWorkersRequest()).workers)

    def cancel(self, job_id, checkpoint=False):
        """Cancels a job; returns its state name afterwards ("CANCELLED", or the state it had
        already ended in). With checkpoint, a running job that saves checkpoints stops after one
        step every rank checkpoints and ends CANCELLED then: "RUNNING" is returned meanwhile
        (FailedPrecondition when it saves none)."""
        return state_name(self._call(self._stub.CancelJob,
                                     job_pb2.CancelJobRequest(job_id=job_id, checkpoint=checkpoint)))

    def watch(self, job_id):
        """Yields StepUpdate, EventUpdate and StateUpdate, in the coordinator's order, from the
        job's first update until it ends (see typed_updates for how each is recognised). The
        coordinator publishes a new state together with the lifecycle event that records it, so a
        watch that runs to the end finishes with EventUpdate (message "SUCCEEDED", "FAILED: ...",
        "CANCELLED: ...") then StateUpdate of that state. It does not raise for a failed job;
        wait() does. A coordinator that restarts or fails over meanwhile is reached again and the
        watch goes on where it was (see _updates). Errors (NotFound, Unavailable once the
        coordinator stayed away for WATCH_RECONNECT_S, ...) are raised when iterating."""
        yield from typed_updates(self._updates(job_id))

    # How long watch() keeps trying to reach a coordinator that went away (restart, failover).
    WATCH_RECONNECT_S = 600.0

    def _updates(self, job_id):
        """The job's JobUpdates, across coordinator restarts: when the stream breaks (UNAVAILABLE)
        or ends before the job did (a shutdown), after the coordinator answered once (or from the
        start, given several coordinators: a failover may be under way), it is opened again for up
        to WATCH_RECONNECT_S; a new stream replays the log from the start, so steps
        and events already yielded (by text, as often as yielded) are skipped."""
        terminal = (job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.CANCELLED)
        last_step, shown, reached, lost_since = -1, {}, False, None
        while True:
            call = self._stub.WatchJob(job_pb2.WatchJobRequest(job_id=job_id))
            state, read = None, {}
            try:
                for update in call:
                    reached, lost_since, state = True, None, update.state
                    if _is_event(update):
                        text = update.event or update.health_event.message
                        read[text] = read.get(text, 0) + 1
                        if read[text] <= shown.get(text, 0):
                            continue
                        shown[text] = read[text]
                    elif _has_step(update):
                        if update.step <= last_step:
                            continue
                        last_step = update.step
                    yield update
                if state in terminal:
                    return
                error = Unavailable(f"{job_id}: the coordinator shut down while the job was running")
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or not (reached or self._several):
                    raise _from_rpc_error(e) from None
                error = _from_rpc_error(e)
            finally:
                call.cancel()  # a consumer that stops early ends the stream; no-op once it has ended
            now = time.monotonic()
            lost_since = lost_since or now
            if now - lost_since > self.WATCH_RECONNECT_S:
                raise error
            time.sleep(0.5)

    def wait(self, job_id):
        """Follows the job to its end; returns the final Job if it SUCCEEDED, raises JobFailed if
        it ended FAILED or CANCELLED (Unavailable if the coordinator stopped first)."""
        for _ in self.watch(job_id):
            pass
        job = self.get(job_id)
        if job.state == "SUCCEEDED":
            return job
        if job.state in TERMINAL_STATES:
            raise JobFailed(job.id, job.state, _end_cause(job.proto), job.failed_rank, job)
        raise Unavailable(f"{job_id}: the coordinator ended the watch while the job was {job.state} "
                          "(it is shutting down)")
