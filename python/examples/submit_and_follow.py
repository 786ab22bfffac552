#!/usr/bin/python3
"""Submits a small pipeline-parallel job to a running coordinator and follows it to the end.

    PIPECOORD_ADDR=127.0.0.1:50051 /usr/bin/python3 python/examples/submit_and_follow.py [JOB.json]

Against a coordinator serving TLS, also set PIPECOORD_TLS_CA (the CA's PEM file) and
PIPECOORD_TOKEN (its bearer token), as for pipectl.

Needs the generated stubs on the path: run it from the repository root after `bazel build
//proto:api_py` (it finds bazel-bin itself), with Debian's python3 (python3-grpcio).
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
for candidate in (os.environ.get("PIPECOORD_PROTO_PATH"), os.path.join(ROOT, "bazel-bin")):
    if candidate and os.path.exists(os.path.join(candidate, "proto", "job_pb2.py")):
        sys.path.insert(0, candidate)
        break
else:
    out = subprocess.run(["bazel", "info", "bazel-bin"], cwd=ROOT, capture_output=True, text=True)
    sys.path.insert(0, out.stdout.strip())

from pipecoord import Client  # noqa: E402  (needs the path set above)
from proto import job_pb2  # noqa: E402


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "examples", "job.json")
    with open(path) as f:
        spec = json.load(f)
    address = os.environ.get("PIPECOORD_ADDR", "127.0.0.1:50051")
    ca = os.environ.get("PIPECOORD_TLS_CA")
    root_certificates = open(ca, "rb").read() if ca else None
    with Client(address, token=os.environ.get("PIPECOORD_TOKEN") or None,
                root_certificates=root_certificates) as client:
        job_id = client.submit(spec)
        print(f"submitted {job_id}")
        for update in client.watch(job_id):
            if update.event:
                print(f"{job_id}: {update.event}")
            else:
                print(f"{job_id} step {update.step + 1}: loss {update.loss:.4f}, "
                      f"{update.step_time_s:.3f} s, bubble {update.measured_bubble_rate:.3f} "
                      f"(predicted {update.predicted_bubble_rate:.3f})")
        job = client.get(job_id)
        print(f"{job_id} ended {job_pb2.JobState.Name(job.state)} after {job.steps_done} steps")
        return 0 if job.state == job_pb2.SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(main())
