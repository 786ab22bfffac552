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
  //kernels/cuda:adamw_test
  //kernels/cuda:attention_test
  //kernels/cuda:checksum_test
  //kernels/cuda:cross_entropy_test
  //kernels/cuda:cuda_allocator_test
  //kernels/cuda:embedding_test
  //kernels/cuda:exact_linear_test
  //kernels/cuda:gemm_test
  //kernels/cuda:known_answer_gemm_test
  //kernels/cuda:rms_norm_test
  //kernels/cuda:rotary_test
  //kernels/cuda:swiglu_test
  //worker/cuda:cuda_stage_model_test
  //worker/cuda:cuda_backend_test
  //worker/cuda:make_backend_test
  //worker/cuda:cuda_backend_timing_test
  //worker/cuda:memory_budget_cuda_test
  //worker/cuda:cuda_transport_choice_test
  //worker/cuda:cuda_data_parallel_test
  //worker/cuda:cuda_strategies_test
  //worker/cuda:cuda_probe_test
  //worker/transport:staged_transport_gpu_test
  //worker/transport:nccl_transport_test
)
GPU_BENCHMARKS=(  # their stdout is the figures in the results file
  //kernels/cuda:gpu_gemm_bench
  //kernels/cuda:attention_bench
  //worker/transport:gpu_transport_bench
  //worker/cuda:cuda_block_bench
)
TOOLS=(  # run_gpu_checks.sh uses all four (device query, end-to-end run)
  //kernels:device_query
  //coordinator
  //worker/daemon:worker
  //cli:pipectl
)
PLANNED=(  # issue 15's checks that do not exist yet: reported as SKIP "not built yet", never PASS
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
