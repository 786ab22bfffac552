#!/usr/bin/env bash
# //worker/transport:gpu_transport_bench: without a GPU (CI) it prints "no CUDA device: ..." and
# exits 0. On a GPU machine (1 MiB, to stay short) it prints the bandwidth table and the overlap
# lines in the format the bench's header states, with serial = compute + transfer and overlap =
# (serial - together) / min(compute, transfer) to the printed rounding.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
bench=worker/transport/gpu_transport_bench
out=$TEST_TMPDIR/bench.out
err=$TEST_TMPDIR/bench.err

rc=0
"$bench" 1 > "$out" 2> "$err" || rc=$?
if grep -q '^no CUDA device: ' "$out"; then
  [ "$rc" -eq 0 ] || fail "no GPU: exit $rc, expected 0 ($(cat "$err"))"
  [ "$(wc -l < "$out")" -eq 1 ] || fail "no GPU: more than the one line: $(cat "$out")"
  echo "no GPU: $(cat "$out")"
  echo "gpu_transport_bench: ok"
  exit 0
fi
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$err")"
cat "$out"
expect() { grep -qE "$1" "$out" || fail "no line matching: $1"; }
expect '^size +d2d_GB/s +staged_GB/s +staged/d2d +nccl_GB/s +nccl/d2d$'
expect '^ +1MiB +[0-9.]+ +[0-9.]+ +[0-9.]+ +([0-9.]+|-) +([0-9.]+|-)$'
expect "^overlap: staged 1MiB cuda:0 -> cuda:0 beside [0-9]+ bf16 GEMMs y = x w\^T \[4096x4096\] \([0-9.]+ ms each\) on the sender's compute stream; wall clock, best of 5 rounds; baseline serial$"
expect '^  compute_ms  transfer_ms  together_ms   serial_ms  overlap  together/serial$'
figures=$(grep -A1 '^  compute_ms ' "$out" | tail -n 1)
/usr/bin/python3 - "$figures" <<'PY' || fail "overlap figures: $figures"
import sys
c, t, g, s, o, r = (float(v) for v in sys.argv[1].split())
assert min(c, t, g) > 0, "times must be positive"
assert abs(s - (c + t)) <= 0.002, "serial != compute + transfer"
assert abs(o - (c + t - g) / min(c, t)) <= 0.001 + 0.002 / min(c, t), "overlap formula"
assert abs(r - g / (c + t)) <= 0.0001 + 0.002 / (c + t), "together/serial"
PY
echo "gpu_transport_bench: ok"
