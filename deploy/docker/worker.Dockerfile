# syntax=docker/dockerfile:1
# The worker image, on NVIDIA's CUDA runtime base (CUDA 13.0, cuBLAS, NCCL), built from the Bazel
# output of a build stage (no prebuilt binary is copied in). From the repository root:
#   docker build -f deploy/docker/worker.Dockerfile -t pipecoord/worker:dev .
# Stage "build" runs Bazel on Debian 12, the distribution the project builds on
# (docs/BUILDING.md), with the CUDA 13.0 toolkit from NVIDIA's Debian 12 repository (nvcc, the
# cudart and cuBLAS headers, NCCL), laid out as the build expects it at /usr/local/cuda
# (third_party/cuda.BUILD: NCCL's header and library beside the toolkit's). NVIDIA publishes no
# Debian-based CUDA image, and Ubuntu 24.04 ships other sonames (Boost 1.83), so the Debian
# libraries the binary links (gRPC, protobuf, Abseil, Boost.System, OpenSSL, OpenBLAS, ...)
# travel with it in /opt/pipecoord/lib; glibc, libstdc++ and the CUDA libraries (cudart,
# cuBLAS, NCCL: matched to the driver by the base) come from the base. Runs without a GPU too
# (--device cpu).
FROM debian:bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates wget \
 && wget -q https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
 && dpkg -i cuda-keyring_1.1-1_all.deb \
 && rm cuda-keyring_1.1-1_all.deb \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bazel-bootstrap g++ protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev \
      libboost-dev libboost-system-dev prometheus-cpp-dev libsqlite3-dev libssl-dev zlib1g-dev \
      libopenblas-dev \
      cuda-nvcc-13-0 cuda-cudart-dev-13-0 libcublas-dev-13-0 libnccl2 libnccl-dev \
 && rm -rf /var/lib/apt/lists/* \
 && if [ ! -e /usr/local/cuda ]; then ln -s /usr/local/cuda-13.0 /usr/local/cuda; fi \
 && ln -sf /usr/include/nccl.h /usr/local/cuda/include/nccl.h \
 && ln -sf /usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2 \
 && ln -sf libnccl.so.2 /usr/local/cuda/lib64/libnccl.so
WORKDIR /src
COPY . .
# Every shared library the binary needs except glibc's, libstdc++, libgcc_s and the CUDA
# libraries (all from the base).
RUN bazel build //worker/daemon:worker \
 && install -D -m 0755 "$(bazel info bazel-bin)/worker/daemon/worker" /out/bin/worker \
 && mkdir -p /out/lib \
 && ldd /out/bin/worker | awk '$3 ~ /^\// {print $3}' \
    | grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcudart|libcublas|libcublasLt|libnccl)\.so' \
    | xargs -r cp -L -t /out/lib

FROM nvidia/cuda:13.0.2-runtime-ubuntu24.04
COPY --from=build /out/ /opt/pipecoord/
ENV LD_LIBRARY_PATH=/opt/pipecoord/lib:${LD_LIBRARY_PATH}
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin pipecoord
USER 10001:10001
# 29500: the data port peers send activations and gradients to (raw TCP, see --advertise).
EXPOSE 29500
ENTRYPOINT ["/opt/pipecoord/bin/worker"]
