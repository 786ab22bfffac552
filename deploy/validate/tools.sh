# Sourced by deploy/'s tests: finds the validators tools/python_env.sh installed from PyPI
# (tools/requirements.txt) into the virtual environment outside the repository, and the commands
# the tests need; says what to run if any is missing.
PIPECOORD_VENV=${PIPECOORD_VENV:-/var/cache/pipecoord/venv}
VPY=$PIPECOORD_VENV/bin/python
HADOLINT=$PIPECOORD_VENV/bin/hadolint
require_deploy_tools() {
  local missing=()
  "$VPY" -c 'import kubernetes_validate, yaml' 2>/dev/null || missing+=("kubernetes-validate and PyYAML in $PIPECOORD_VENV")
  [ -x "$HADOLINT" ] || missing+=("hadolint in $PIPECOORD_VENV")
  for c in "$@"; do command -v "$c" >/dev/null || missing+=("$c"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "FAIL: missing ${missing[*]}: run tools/setup.sh (or tools/python_env.sh)" >&2
    exit 1
  fi
}
