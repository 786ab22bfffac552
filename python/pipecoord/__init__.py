"""Python client for pipecoord's coordinator, on stubs generated from proto/.

    from pipecoord import Client, EventUpdate, JobFailed, StateUpdate, StepUpdate
    with Client("127.0.0.1:50051") as client:
        job_id = client.submit("examples/job.json")   # a JobSpec message, dict, JSON text or file
        for update in client.watch(job_id):
            if isinstance(update, StepUpdate):
                print(update.step, update.loss)
            elif isinstance(update, EventUpdate):
                print(update.kind, update.message)
            elif isinstance(update, StateUpdate):
                print(update.state)                   # "PENDING", "RUNNING", "SUCCEEDED", ...
        job = client.wait(job_id)                      # raises JobFailed unless it SUCCEEDED

Errors are PipecoordError subclasses (InvalidArgument, NotFound, ...), never raw grpc errors.
The generated modules (proto/*_pb2.py) must be importable: Bazel builds them as //proto:api_py;
examples put their output folder on sys.path (see python/examples/). The client is imported on
first use of one of its names (PEP 562 module __getattr__), so the package's other modules
(pipecoord.reference_model, pipecoord.safetensors_io, ...) import without the generated protos.
"""
import importlib

__all__ = [
    "TERMINAL_STATES",
    "Client",
    "DryRun",
    "EventUpdate",
    "FailedPrecondition",
    "InvalidArgument",
    "Job",
    "JobFailed",
    "NotFound",
    "PermissionDenied",
    "PipecoordError",
    "ResourceExhausted",
    "StateUpdate",
    "StepUpdate",
    "Unauthenticated",
    "Unavailable",
    "load_spec",
    "state_name",
    "typed_updates",
]


def __getattr__(name):
    if name in __all__:
        return getattr(importlib.import_module("pipecoord.client"), name)
    raise AttributeError("module 'pipecoord' has no attribute %r" % name)


def __dir__():
    return sorted(list(globals()) + __all__)
