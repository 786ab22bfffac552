#!/usr/bin/env bash
# Installs what building and testing pipecoord needs on Debian 12, then starts nothing.
# Idempotent and quiet when everything is there already; run as root (or with sudo available).
set -euo pipefail

packages=(
  bazel-bootstrap            # Bazel 4.2.3, builds offline with third_party/ stubs
  g++ libgtest-dev libgmock-dev libbenchmark-dev
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libboost-dev libboost-system-dev
  prometheus-cpp-dev libsqlite3-dev libssl-dev zlib1g-dev
  python3 python3-venv python3-grpcio python3-protobuf  # python3-venv: tools/python_env.sh
  openssl                    # certificates for the TLS tests and the local launcher (deploy/local/pki.sh)
  prometheus chromium chromium-driver python3-selenium  # /metrics and dashboard tests
  kubectl                    # deploy/ tests: kubectl kustomize (v1.32)
  clang-14 libclang-rt-14-dev  # fuzz/: libFuzzer targets with ASan and UBSan
  libopenblas-dev            # the CPU backend's fp32 GEMMs (kernels/cpu/linear.cc)
  etcd-server etcd-client golang-etcd-server-dev  # coordinators in high availability: a real etcd 3.4 for tests; its .proto files (third_party/etcd)
  fortunes                   # 2.5 MB of English text (/usr/share/games/fortunes): tools/demo.sh trains on it byte by byte
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The Python packages taken from PyPI (tools/requirements.txt, pinned: PyTorch 2, numpy, the
# client's grpcio and protobuf, deploy/'s validators), in a virtual environment outside the
# repository.
"$(dirname "$0")/python_env.sh"

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: /usr/local/cuda/bin/nvcc not found: the CUDA 13 toolkit (with NCCL and cuBLAS)" \
       "must be installed at /usr/local/cuda to build kernels/ (see docs/BUILDING.md)" >&2
  exit 1
fi
