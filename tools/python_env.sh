#!/usr/bin/env bash
# Makes the virtual environment with the Python packages pipecoord takes from PyPI, pinned in
# tools/requirements.txt, outside the repository:
#   tools/python_env.sh [DIR]        (default: $PIPECOORD_VENV or /var/cache/pipecoord/venv)
# Quiet and quick when DIR already holds exactly these pins (its copy of requirements.txt equals
# the repository's); otherwise (re)installs them and checks their dependencies are consistent.
# Built on Debian's /usr/bin/python3 (python3-venv). Called by tools/setup.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${PIPECOORD_VENV:-/var/cache/pipecoord/venv}}
# Files from PyPI that tests read but nothing imports, downloaded (not installed: their packages'
# dependencies are not pipecoord's), sha256 pinned: megatron-bridge's wheel holds Megatron-LM's
# theoretical memory formulas (tests/memory_peers; megatron-core's wheel does not ship them).
peer_wheels() {
  local wheel=megatron_bridge-0.3.1-py3-none-any.whl
  local sha=4d9a9ad679bd927a84f923e5239512d72af7fa47331b749a8f275592c2920616
  if ! echo "$sha  $dir/wheels/$wheel" | sha256sum --check --status 2>/dev/null; then
    mkdir -p "$dir/wheels"
    "$dir/bin/python" -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
      --only-binary=:all: -d "$dir/wheels" megatron-bridge==0.3.1
    echo "$sha  $dir/wheels/$wheel" | sha256sum --check --status ||
      { echo "setup: $dir/wheels/$wheel: sha256 is not the pinned $sha" >&2; exit 1; }
  fi
}
if cmp -s "$here/requirements.txt" "$dir/requirements.txt" && [ -x "$dir/bin/python" ]; then
  peer_wheels
  exit 0
fi
sudo=""
if ! { mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; }; then
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo mkdir -p "$dir"
  $sudo chown "$(id -u):$(id -g)" "$dir"
fi
start=$(date +%s)
echo "setup: installing the pinned PyPI packages (tools/requirements.txt) into $dir" >&2
rm -f "$dir/requirements.txt"
[ -x "$dir/bin/python" ] || /usr/bin/python3 -m venv --clear "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-deps \
  -r "$here/requirements.txt"
# Packages a former pin list had and this one has not go (the venv holds exactly the pins).
"$dir/bin/python" - "$here/requirements.txt" <<'PY'
import re, subprocess, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
want = {norm(l.split("==")[0]) for l in open(sys.argv[1]) if "==" in l.split("#")[0]}
have = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                      capture_output=True, text=True, check=True).stdout.split()
extra = [n.split("==")[0] for n in have if norm(n.split("==")[0]) not in want | {"pip", "setuptools"}]
if extra:
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *extra], check=True)
PY
"$dir/bin/python" -m pip check --disable-pip-version-check >/dev/null ||
  { "$dir/bin/python" -m pip check; exit 1; }
peer_wheels
cp "$here/requirements.txt" "$dir/requirements.txt"  # last: an interrupted install is redone
echo "setup: Python packages ready in $(( $(date +%s) - start )) s" >&2
