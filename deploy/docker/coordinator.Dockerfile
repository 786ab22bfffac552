# syntax=docker/dockerfile:1
# The coordinator image, built from the Bazel output of a build stage (no prebuilt binary is
# copied in). From the repository root:
#   docker build -f deploy/docker/coordinator.Dockerfile -t pipecoord/coordinator:dev .
# Stage "build" runs Bazel on Debian 12, the distribution the project builds on
# (docs/BUILDING.md). The runtime stage is Debian 12 slim with the shared libraries the binary
# links (gRPC 1.51, protobuf 3.21, prometheus-cpp 1.0, civetweb and their dependencies), a
# non-root user and nothing else.

FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bazel-bootstrap g++ protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev \
      libboost-dev libboost-system-dev prometheus-cpp-dev libsqlite3-dev libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN bazel build //coordinator \
 && install -D -m 0755 "$(bazel info bazel-bin)/coordinator/coordinator" /out/coordinator

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 libsqlite3-0 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin pipecoord \
 && install -d -o 10001 -g 10001 /var/lib/pipecoord
COPY --from=build /out/coordinator /usr/local/bin/coordinator
USER 10001:10001
# 50051: gRPC (jobs, workers, grpc.health.v1; TLS with --tls-*). 8080: HTTP /metrics and the
# dashboard. 50052: plaintext grpc.health.v1 for probes (--health-listen, as the pods pass it).
EXPOSE 50051 8080 50052
ENTRYPOINT ["/usr/local/bin/coordinator"]
CMD ["--listen", "0.0.0.0:50051", "--http", "0.0.0.0:8080"]
