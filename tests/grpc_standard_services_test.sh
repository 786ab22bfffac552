#!/usr/bin/env bash
# The coordinator answers the standard gRPC health check (as Kubernetes grpc probes call it) and
# server reflection (as grpcurl uses it): real calls over loopback.
source tests/lib.sh
start_coordinator
gen=$(dirname "$(dirname "$(dirname "$(readlink -f tests/grpc_protos/health_pb2.py)")")")
PYTHONPATH="$gen" /usr/bin/python3 - <<'PY' || fail "standard services"
import os, grpc
from google.protobuf import descriptor_pb2
from tests.grpc_protos import health_pb2, health_pb2_grpc, reflection_pb2, reflection_pb2_grpc
channel = grpc.insecure_channel(os.environ["PIPECOORD_ADDR"])
health = health_pb2_grpc.HealthStub(channel)
assert health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
refl = reflection_pb2_grpc.ServerReflectionStub(channel)
def ask(**kw):
    return next(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(**kw)]), timeout=5))
names = sorted(s.name for s in ask(list_services="*").list_services_response.service)
for want in ("grpc.health.v1.Health", "pipecoord.v1.JobService", "pipecoord.v1.WorkerService"):
    assert want in names, names
files = ask(file_containing_symbol="pipecoord.v1.JobService").file_descriptor_response.file_descriptor_proto
fd = descriptor_pb2.FileDescriptorProto.FromString(files[0])
assert fd.name == "proto/job.proto", fd.name
assert [m.name for m in fd.service[0].method][:2] == ["SubmitJob", "GetJob"], fd.service[0].method
print("health SERVING; reflection lists", names)
PY
echo "standard services: ok"
