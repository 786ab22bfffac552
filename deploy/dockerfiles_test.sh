#!/usr/bin/env bash
# The Dockerfiles (no Docker engine runs here, so nothing is built): two Dockerfile linters from
# npm, dockerfile-utils (the parser and validator behind the VS Code Docker language service)
# and dockerfilelint, must find nothing, and must both reject a broken fixture (proof they run).
# Then the project's rules: multi-stage, a build stage that runs Bazel, a non-root final user,
# and runtime packages that cover what the coordinator links.
set -euo pipefail
source deploy/validate/tools.sh
require_deploy_tools
bin=$DEPLOY_TOOLS/node_modules/.bin
fail() { echo "FAIL: $*" >&2; exit 1; }
echo "$("$bin/dockerfile-utils" --version), dockerfilelint $(node -p "require('$DEPLOY_TOOLS/node_modules/dockerfilelint/package.json').version")"

# dockerfilelint refuses symlinks (Bazel's runfiles): the linters read the real files.
for f in deploy/docker/coordinator.Dockerfile deploy/docker/worker.Dockerfile; do
  f=$(readlink -f "$f")
  out=$("$bin/dockerfile-utils" lint "$f") || fail "dockerfile-utils lint $f: $out"
  [ -z "$out" ] || fail "dockerfile-utils lint $f: $out"
  "$bin/dockerfilelint" "$f" > /dev/null || fail "dockerfilelint $f: $("$bin/dockerfilelint" "$f")"
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

bad=$(readlink -f deploy/validate/testdata/bad.Dockerfile)
if out=$("$bin/dockerfile-utils" lint "$bad"); then fail "dockerfile-utils accepted $bad"; fi
grep -q "Unknown instruction: RUNN" <<< "$out" || fail "dockerfile-utils on $bad: $out"
if out=$("$bin/dockerfilelint" "$bad"); then fail "dockerfilelint accepted $bad"; fi
grep -q "Invalid Port Exposed" <<< "$out" || fail "dockerfilelint on $bad: $out"
echo "both linters reject $bad"
echo "PASS"
