"""The Python stubs generated from proto/ import under Debian's python3 and round-trip a job."""
import sys

from google.protobuf import json_format

from proto import job_pb2, job_pb2_grpc, worker_pb2_grpc


def main():
    spec = json_format.Parse('{"schedule": "zbh1", "pp": 4, "stageLayers": [2, 2, 1, 1]}',
                             job_pb2.JobSpec())
    assert spec.pp == 4 and list(spec.stage_layers) == [2, 2, 1, 1], spec
    back = job_pb2.JobSpec.FromString(spec.SerializeToString())
    assert back == spec
    assert hasattr(job_pb2_grpc, "JobServiceStub")
    assert hasattr(worker_pb2_grpc, "WorkerServiceStub")
    print("python stubs OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
