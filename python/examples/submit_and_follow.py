#!/usr/bin/python3
"""Submits a small pipeline-parallel job to a running coordinator and follows it to the end.

    PIPECOORD_ADDR=127.0.0.1:50051 /usr/bin/python3 python/examples/submit_and_follow.py [JOB.json]

Against a coordinator serving TLS, also set PIPECOORD_TLS_CA (the CA's PEM file) and
PIPECOORD_TOKEN (its bearer token), as for pipectl. It prints a line per step, event and state
change; exits 0 if the job SUCCEEDED, 1 if it ended FAILED or CANCELLED, 2 on an error (a bad spec,
an unreachable coordinator: the client's typed errors).

Needs the generated stubs on the path: run it from the repository root after `bazel build
//proto:api_py` (it finds bazel-bin itself), with Debian's python3 (python3-grpcio).
"""
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

from pipecoord import (Client, EventUpdate, JobFailed, PipecoordError, StateUpdate,  # noqa: E402
                       StepUpdate)  # (imports need the path set above)


def follow(client, job_id):
    """Prints a line per update until the job ends; returns the exit code (0: SUCCEEDED)."""
    for update in client.watch(job_id):
        if isinstance(update, StepUpdate):
            print(f"{job_id} step {update.step + 1}: loss {update.loss:.4f}, {update.step_time_s:.3f} s, "
                  f"bubble {update.measured_bubble_rate:.3f} (predicted {update.predicted_bubble_rate:.3f})")
        elif isinstance(update, EventUpdate):
            print(f"{job_id} [{update.kind.lower()}] {update.message}")
        elif isinstance(update, StateUpdate):
            print(f"{job_id} is {update.state}")
    try:
        job = client.wait(job_id)  # the job has ended: returns the Job at once, or raises JobFailed
    except JobFailed as e:
        rank = f" (rank {e.failed_rank})" if e.failed_rank is not None else ""
        print(f"{e.job_id} ended {e.state} after {e.job.steps_done} steps: {e.cause}{rank}")
        return 1
    print(f"{job.id} ended {job.state} after {job.steps_done} steps")
    return 0


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "examples", "job.json")
    address = os.environ.get("PIPECOORD_ADDR", "127.0.0.1:50051")
    ca = os.environ.get("PIPECOORD_TLS_CA")
    root_certificates = open(ca, "rb").read() if ca else None
    try:
        with Client(address, token=os.environ.get("PIPECOORD_TOKEN") or None,
                    root_certificates=root_certificates) as client:
            job_id = client.submit(path)  # the JSON file: a bad field or a repeated key is refused
            print(f"submitted {job_id}")
            return follow(client, job_id)
    except PipecoordError as e:  # InvalidArgument, NotFound, Unauthenticated, Unavailable, ...
        print(f"submit_and_follow: {e} ({e.code})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
