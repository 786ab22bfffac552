#!/usr/bin/env bash
# Installs the pinned validators deploy/'s tests use (package.json + package-lock.json beside this
# file) with npm ci into a folder outside the repository, so the tests then run offline:
#   deploy/validate/install.sh [DIR]     (default: $PIPECOORD_DEPLOY_TOOLS or the path below)
# Idempotent and quiet: does nothing when DIR already holds this exact lock file. Called by
# tools/setup.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${PIPECOORD_DEPLOY_TOOLS:-/var/cache/pipecoord/deploy-tools}}

if cmp -s "$here/package-lock.json" "$dir/package-lock.json" && [ -d "$dir/node_modules" ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
# NodeSource's nodejs carries npm; Debian's nodejs does not (Debian's npm package then).
if ! command -v npm >/dev/null; then
  echo "setup: installing npm" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
if mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; then sudo=""; else $sudo mkdir -p "$dir"; fi
echo "setup: installing deploy/ validators into $dir" >&2
$sudo rm -rf "$dir/node_modules" "$dir/package-lock.json"
$sudo cp "$here/package.json" "$here/package-lock.json" "$dir/"
(cd "$dir" && $sudo npm ci --no-audit --no-fund --loglevel=error >/dev/null)
