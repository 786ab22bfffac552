# syntax=docker/dockerfile:1
# The worker image, on NVIDIA's CUDA runtime base (CUDA 13.0, NCCL), built from the Bazel output
# of a build stage (no prebuilt binary is copied in). From the repository root:
#   docker build -f deploy/docker/worker.Dockerfile -t pipecoord/worker:dev .
# Stage "build" runs Bazel on Debian 12, the distribution the project builds on
# (docs/BUILDING.md). NVIDIA publishes no Debian-based CUDA image, and Ubuntu 24.04 ships other
# sonames (Boost 1.83), so the Debian libraries the binary links (gRPC, protobuf, Abseil,
# Boost.System, OpenSSL, ...) travel with it in /opt/pipecoord/lib; glibc and libstdc++ come from
# the base, which is newer than Debian 12's. Runs without a GPU too (--device cpu).
# When the CUDA backend lands (issue 6), the build stage also needs nvcc, cuBLAS and NCCL headers
# at /usr/local/cuda (NVIDIA's Debian 12 repository: cuda-nvcc-13-0, libcublas-dev-13-0,
# libnccl-dev); the runtime base already has the libraries.
FROM debian:bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bazel-bootstrap g++ protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev \
      libboost-dev libboost-system-dev prometheus-cpp-dev libsqlite3-dev libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Every shared library the binary needs except glibc's, libstdc++ and libgcc_s (from the base).
RUN bazel build //worker/daemon:worker \
 && install -D -m 0755 "$(bazel info bazel-bin)/worker/daemon/worker" /out/bin/worker \
 && mkdir -p /out/lib \
 && ldd /out/bin/worker | awk '$3 ~ /^\// {print $3}' \
    | grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so' \
    | xargs -r cp -L -t /out/lib

FROM nvidia/cuda:13.0.2-runtime-ubuntu24.04
COPY --from=build /out/ /opt/pipecoord/
ENV LD_LIBRARY_PATH=/opt/pipecoord/lib:${LD_LIBRARY_PATH}
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin pipecoord
USER 10001:10001
# 29500: the data port peers send activations and gradients to (raw TCP, see --advertise).
EXPOSE 29500
ENTRYPOINT ["/opt/pipecoord/bin/worker"]
