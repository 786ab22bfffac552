#!/usr/bin/env bash
# Fuzzes one target for a bounded time: run_fuzzer.sh FUZZER CORPUS_DIR SECONDS [seed: $FUZZ_SEED].
# Starts from a copy of the committed corpus (new inputs stay in the test's temporary folder) and
# fails on a crash, sanitizer report, leak, timeout (10 s per input) or out-of-memory, printing
# the input in base64 so it can be committed to the corpus as a regression file; the input also
# lands in Bazel's undeclared outputs (bazel-testlogs/fuzz/<name>_fuzz_test/test.outputs).
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp}"
mkdir -p "$tmp/corpus" "$artifacts"
cp "$corpus"/* "$tmp/corpus/"

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# A fixed seed by default, so a CI run explores the same inputs for the same code and a red run
# can be reproduced; FUZZ_SEED=0 (bazel test --test_env=FUZZ_SEED=0) asks libFuzzer for a random one.
seed=${FUZZ_SEED:-1}
status=0
"$fuzzer" -seed="$seed" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$tmp/corpus" >"$tmp/log" 2>&1 || status=$?

name=$(basename "$fuzzer")
if [ "$status" -ne 0 ]; then
  tail -n 80 "$tmp/log"
  for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*; do
    [ -e "$f" ] || continue
    echo "$name: input $(basename "$f") (base64, add it to fuzz/corpus/${name%_fuzz}/):"
    base64 -w 76 "$f"
  done
  echo "$name: FAILED (exit $status)"
  exit 1
fi
grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$tmp/log" || true
echo "$name: ok, $(grep -c . <(ls "$tmp/corpus")) inputs in the corpus after ${seconds} s ($(ls "$corpus" | wc -l) seeds, -seed=$seed)"
