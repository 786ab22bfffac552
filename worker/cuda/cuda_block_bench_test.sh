#!/usr/bin/env bash
# //worker/cuda:cuda_block_bench on this machine: the host build (the same source on the host double
# of the GPU) at a small shape prints the JSON tools/block_vs_torch.py reads, in bf16 and f32; bad
# flags and a bad shape exit 2 naming the flag or field; the real binary, without a GPU, prints
# "no CUDA device: ..." and exits 0 (on a GPU it must print the same JSON at the small shape).
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
host=worker/cuda/cuda_block_bench_host
real=worker/cuda/cuda_block_bench
small=(--batch 2 --seq 40 --hidden 64 --heads 4 --ffn 192 --warmup 1 --reps 3)

# check_json FILE DTYPE DEVICE_REGEX: the keys and values block_vs_torch.py and the lead rely on.
check_json() {
  /usr/bin/python3 - "$@" <<'PY'
import json, re, sys
path, dtype, device = sys.argv[1:4]
with open(path) as f:
    r = json.load(f)
def need(cond, what):
    if not cond:
        sys.exit(f"{path}: {what}: {json.dumps(r)}")
need(r["bench"] == "cuda_block_bench", "bench")
need(re.fullmatch(device, r["device"]), "device")
need(r["dtype"] == dtype, "dtype")
need(r["shape"] == {"batch": 2, "seq": 40, "hidden": 64, "heads": 4, "ffn": 192}, "shape")
need(r["warmup"] == 1 and r["reps"] == 3, "warmup, reps")
for key in ("block_s", "block_s_median"):
    for phase in ("F", "B", "W", "BW"):
        v = r[key][phase]
        need(isinstance(v, float) and v > 0, f"{key}.{phase} is not a positive number")
s, m = r["block_s"], r["block_s_median"]
for phase in ("F", "B", "W", "BW"):
    need(s[phase] <= m[phase], f"block_s.{phase} (the best) above the median")
need(s["W_from_BW_minus_B"] == max(s["BW"] - s["B"], 0.0), "W_from_BW_minus_B")
# torch_block_bench.py's block_flops at this shape: 2 n (4 h^2 + 3 h f) + 2 b s^2 h.
gemm = 2 * 80 * (4 * 64 * 64 + 3 * 64 * 192)
attention = 2 * 2 * 2 * 40 * 40 * 64 / 2
need(r["forward_flops"] == {"total": gemm + attention, "gemm": gemm, "attention": attention}, "forward_flops")
need(abs(r["block_forward_tflops"] - (gemm + attention) / s["F"] / 1e12) <= 1e-9 * r["block_forward_tflops"],
     "block_forward_tflops")
need(r["pool_peak_allocated_bytes"] > 0, "pool_peak_allocated_bytes")
PY
}

for dtype in bf16 f32; do
  "$host" "${small[@]}" --dtype "$dtype" > "$TEST_TMPDIR/host-$dtype.json" 2> "$TEST_TMPDIR/host.err" \
    || fail "host build, $dtype: exit $?: $(cat "$TEST_TMPDIR/host.err")"
  check_json "$TEST_TMPDIR/host-$dtype.json" "$dtype" 'host double' || fail "host build, $dtype: bad JSON"
done
echo "host build: $(tr -d '\n' < "$TEST_TMPDIR/host-bf16.json" | head -c 400)..."

# expect_usage_error MESSAGE ARGS...: exit 2 and MESSAGE on stderr, nothing on stdout.
expect_usage_error() {
  local want=$1 rc=0
  shift
  "$host" "$@" > "$TEST_TMPDIR/bad.out" 2> "$TEST_TMPDIR/bad.err" || rc=$?
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$TEST_TMPDIR/bad.err"))"
  grep -qF -- "$want" "$TEST_TMPDIR/bad.err" || fail "$*: stderr lacks '$want': $(cat "$TEST_TMPDIR/bad.err")"
  [ ! -s "$TEST_TMPDIR/bad.out" ] || fail "$*: printed on stdout: $(cat "$TEST_TMPDIR/bad.out")"
}
expect_usage_error "--reps: must be >= 1, got 0" "${small[@]}" --reps 0
expect_usage_error "--warmup: must be >= 0, got -1" "${small[@]}" --warmup -1
expect_usage_error "--dtype: must be bf16 or f32" "${small[@]}" --dtype fp16
expect_usage_error "hidden: must be a multiple of heads (3), got 64" "${small[@]}" --heads 3
expect_usage_error "--seq: expected an integer" "${small[@]}" --seq long

# The real binary: no GPU here, so the skip line and exit 0; on a GPU machine, the JSON.
rc=0
"$real" "${small[@]}" > "$TEST_TMPDIR/real.out" 2> "$TEST_TMPDIR/real.err" || rc=$?
if grep -q '^no CUDA device: ' "$TEST_TMPDIR/real.out"; then
  [ "$rc" -eq 0 ] || fail "no GPU: exit $rc, expected 0"
  echo "real binary: $(cat "$TEST_TMPDIR/real.out")"
else
  [ "$rc" -eq 0 ] || fail "real binary: exit $rc: $(cat "$TEST_TMPDIR/real.err")"
  check_json "$TEST_TMPDIR/real.out" bf16 '.+' || fail "real binary: bad JSON"
  echo "real binary on $(sed -n 's/.*"device": "\([^"]*\)".*/\1/p' "$TEST_TMPDIR/real.out")"
fi
echo "cuda_block_bench: ok"
