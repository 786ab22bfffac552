#!/usr/bin/env bash
# The GPU bundle, assembled from this test's data deps as tools/gpu_bundle.sh assembles it from
# bazel-bin: every binary's libraries resolve inside it (the machine's glibc and CUDA ones
# excepted), it fits the device tool's 64 MiB, and run_gpu_checks.sh runs here with no GPU: the
# device checks SKIP with the runtime's reason, the CPU end-to-end run PASSes, a FAIL exits 1.
set -euo pipefail
source tools/gpu_bundle.sh  # the lists and label_path only
fail() { echo "FAIL: $*" >&2; exit 1; }

args=(--label gpu_bundle_test)
add() {  # add KIND LABEL
  local path
  path=$(label_path "$2")
  [ -x "$path" ] || fail "$2 is listed in tools/gpu_bundle.sh but is not in //tools:gpu_bundle_test's data"
  args+=("--$1" "$PWD/$path")
}
for l in "${TOOLS[@]}"; do add tool "$l"; done
for l in "${GPU_TESTS[@]}"; do add test "$l"; done
for l in "${GPU_BENCHMARKS[@]}"; do add bench "$l"; done
for p in "${PLANNED[@]}"; do args+=(--planned "$p"); done
packed=$TEST_TMPDIR/gpubundle
tools/gpu_bundle_assemble.sh "$packed" "${args[@]}"
[ -f "$packed/payload.tar.xz" ] && [ ! -e "$packed/bin" ] || fail "the bundle's binaries are not packed in payload.tar.xz"
# The checks below look inside: the same bundle unpacked by hand (run_gpu_checks.sh runs both forms).
bundle=$TEST_TMPDIR/unpacked
cp -r "$packed" "$bundle"
tar -C "$bundle" -xJf "$bundle/payload.tar.xz"
rm "$bundle/payload.tar.xz"

# 1. Libraries: with the bundle's lib folder alone on LD_LIBRARY_PATH, nothing is missing and
# nothing resolves outside the bundle but glibc and the CUDA libraries the machine provides.
# (The binaries also see this machine's system folders, so a library the assembler forgot would
# resolve to /lib/x86_64-linux-gnu and be caught here.)
n_bins=0
for b in "$bundle"/bin/*; do
  n_bins=$((n_bins + 1))
  out=$(env LD_LIBRARY_PATH="$bundle/lib" ldd "$b")
  ! grep -q "not found" <<< "$out" || fail "$(basename "$b"): $(grep "not found" <<< "$out")"
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    case "$path" in "$bundle/lib/"*) continue ;; esac
    # Written out here rather than taken from tools/gpu_bundle_libs.sh, so a wrong policy there
    # cannot pass: glibc and the CUDA driver, cuBLAS and NCCL only.
    case "$name" in
      libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | libresolv.so.2) ;;
      libcuda.so.* | libnvidia-* | libcublas.so.* | libcublasLt.so.* | libnccl.so.*) ;;
      *) fail "$(basename "$b"): $name resolves outside the bundle, to $path" ;;
    esac
  done <<< "$out"
done
[ "$n_bins" -eq $((${#TOOLS[@]} + ${#GPU_TESTS[@]} + ${#GPU_BENCHMARKS[@]})) ] || fail "$n_bins binaries in the bundle"
# The libraries a bare CUDA machine lacks are there (not merely resolved from this machine).
for lib in libgrpc++.so.1.51 libprotobuf.so.32 libssl.so.3 libsqlite3.so.0 libboost_system.so.1.74.0 \
           libstdc++.so.6 libcudart.so.13 libkernels_Slibdevice.so; do
  [ -f "$bundle/lib/$lib" ] || fail "$lib is not in the bundle"
done
[ ! -e "$bundle/lib/libnccl.so.2" ] || fail "libnccl.so.2 is in the bundle (the machine provides it)"

# 2. Size: what the device tool carries.
bytes=$(du -sb "$packed" | cut -f1)
[ "$bytes" -le $((64 * 1024 * 1024)) ] || fail "the bundle is $bytes bytes, over 64 MiB"
echo "bundle: $bytes bytes"

# 3. The checks, here: no GPU, so the device checks SKIP with the reason; the CPU run PASSes.
mkdir -p "$TEST_TMPDIR/out"
OUT=$TEST_TMPDIR/out "$packed/run_gpu_checks.sh" > "$TEST_TMPDIR/checks.log" 2>&1 \
  || { cat "$TEST_TMPDIR/checks.log"; fail "run_gpu_checks.sh exited non-zero"; }
results=$TEST_TMPDIR/out/results.txt
[ -f "$results" ] || fail "no results.txt in \$OUT"
[ -f "$TEST_TMPDIR/out/logs.txt" ] || fail "no logs.txt in \$OUT"
cat "$results"
expect() { grep -qE "$1" "$results" || fail "results.txt has no line matching: $1"; }
expect '^date     [0-9]{4}-[0-9]{2}-[0-9]{2}T'
expect '^driver   '
expect '^runtime  \(device_query\) CUDA runtime 13\.[0-9]+, NCCL 2\.[0-9]+\.[0-9]+$'
expect '^PASS  libraries '
if grep -q '^SKIP  device_query ' "$results"; then
  expect '^SKIP  device_query           no CUDA device: .+'
  expect '^SKIP  device_test            no CUDA device: .+'
else
  expect '^PASS  device_query           [0-9]+ device\(s\), self-test kernel OK on each$'
fi
expect '^PASS  e2e_cpu                coordinator \+ 2 workers \(--device cpu, fp32\) on loopback: job-000001 SUCCEEDED, 3/3 steps, loss [0-9.]+ -> [0-9.]+, step time .*, health events: none$'
if grep -q '^SKIP  device_query ' "$results"; then
  for check in e2e_cuda_fp32 e2e_cuda_bf16 e2e_cuda_pp4 e2e_cuda_dp2 torch_block_bench gemm_test nccl_transport_test \
               cuda_data_parallel_test cuda_strategies_test cuda_probe_test cuda_transport_choice_test gpu_gemm_bench cuda_block_bench block_vs_torch; do
    expect "^SKIP  $check +no CUDA device: .+"
  done
fi
# A planned check is reported as not built, never passed; none else is "not built".
for p in "${PLANNED[@]}"; do expect "^SKIP  ${p%%|*} +not built yet: "; done
[ "$(grep -c 'not built yet' "$results")" -eq "${#PLANNED[@]}" ] || fail "a check is reported as not built that PLANNED does not list"
expect '^[0-9]+ PASS, 0 FAIL, [0-9]+ SKIP$'

# 4. A failing check fails the run: a worker that cannot start fails the end-to-end run.
broken=$TEST_TMPDIR/broken
cp -r "$bundle" "$broken"
printf '#!/bin/sh\necho "worker: broken on purpose" >&2\nexit 1\n' > "$broken/bin/worker"
if OUT='' "$broken/run_gpu_checks.sh" > "$TEST_TMPDIR/broken.log" 2>&1; then
  fail "run_gpu_checks.sh exited 0 with a broken worker"
fi
grep -q '^FAIL  e2e_cpu                worker 1 exited: worker: broken on purpose$' "$broken/results.txt" \
  || fail "no FAIL line for the broken worker: $(cat "$broken/results.txt")"
grep -qE '^[0-9]+ PASS, 1 FAIL, [0-9]+ SKIP$' "$broken/results.txt" || fail "summary: $(tail -1 "$broken/results.txt")"
echo "gpu bundle: ok"
