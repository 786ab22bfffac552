#!/usr/bin/env bash
# Builds the GPU bundle: the GPU tests and benchmarks, the coordinator, worker and pipectl, with
# every shared library a bare CUDA machine lacks, and run_gpu_checks.sh, in one folder under
# 64 MiB that the device tool can carry (docs/gpu-results.md says how to run it there).
#   tools/gpu_bundle.sh [OUTDIR]     (default: gpubundle/ in the repository, git-ignored)
# Sourced (as //tools:gpu_bundle_test does), it only defines the lists below and label_path.

# What the bundle holds: a new GPU test or benchmark is one line here, plus the same label in
# //tools:gpu_bundle_test's data (the test fails naming any label missing there).
GPU_TESTS=(  # GoogleTest binaries; run_gpu_checks.sh runs each and reports PASS / FAIL / SKIP
  //kernels:device_test
)
GPU_BENCHMARKS=(  # their stdout is the figures in the results file
)
TOOLS=(  # run_gpu_checks.sh uses all four (device query, end-to-end run)
  //kernels:device_query
  //coordinator
  //worker/daemon:worker
  //cli:pipectl
)
PLANNED=(  # issue 15's checks that do not exist yet: reported as SKIP "not built yet", never PASS
  "cuda_kernel_tests|the CUDA forward/backward kernels (issue 15) are not written"
  "allocator_test|the GPU caching allocator (issue 15) is not written"
  "nccl_transport_test|the NCCL transport (issue 15) is not written"
  "benchmarks|no GPU benchmark exists yet (issue 15)"
  "e2e_cuda|workers with --device cuda cannot run jobs yet: the CUDA backend is not built (worker/daemon/cpu_backend.cc answers UNIMPLEMENTED)"
)

# label_path LABEL: the binary's path under bazel-bin (or a runfiles root).
label_path() {
  local label=${1#//}
  case "$label" in
    *:*) echo "${label%%:*}/${label#*:}" ;;
    *) echo "$label/$(basename "$label")" ;;
  esac
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0

set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpubundle}
# Binaries keep Bazel's own flags (.bazelrc builds with -O2); the symlinks are left alone so the
# build does not move bazel-bin under someone else's feet.
bazel build --symlink_prefix=/ "${TOOLS[@]}" "${GPU_TESTS[@]}" "${GPU_BENCHMARKS[@]}"
bin=$(bazel info --symlink_prefix=/ bazel-bin 2>/dev/null)
args=(--label "$(git describe --always --dirty 2>/dev/null || echo unknown)")
for l in "${TOOLS[@]}"; do args+=(--tool "$bin/$(label_path "$l")"); done
for l in "${GPU_TESTS[@]}"; do args+=(--test "$bin/$(label_path "$l")"); done
for l in "${GPU_BENCHMARKS[@]}"; do args+=(--bench "$bin/$(label_path "$l")"); done
for p in "${PLANNED[@]}"; do args+=(--planned "$p"); done
tools/gpu_bundle_assemble.sh "$out" "${args[@]}"
