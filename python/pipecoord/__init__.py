"""Python client for pipecoord's coordinator, on stubs generated from proto/.

    from pipecoord import Client
    client = Client("127.0.0.1:50051")
    job_id = client.submit({"schedule": "1f1b", "pp": 2, ...})   # a JobSpec as a dict or message
    for update in client.watch(job_id):
        print(update.step, update.loss)

The generated modules (proto/*_pb2.py) must be importable: Bazel builds them as //proto:api_py;
examples put their output folder on sys.path (see python/examples/).
"""
from pipecoord.client import Client, JobFailed, TERMINAL_STATES

__all__ = ["Client", "JobFailed", "TERMINAL_STATES"]
