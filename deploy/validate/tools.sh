# Sourced by deploy/'s tests: finds the validators deploy/validate/install.sh put outside the
# repository (tools/setup.sh runs it) and the commands the tests need; says what to run if not.
DEPLOY_TOOLS=${PIPECOORD_DEPLOY_TOOLS:-/var/cache/pipecoord/deploy-tools}
require_deploy_tools() {
  local missing=()
  [ -d "$DEPLOY_TOOLS/node_modules/kubernetes-models" ] || missing+=("validators in $DEPLOY_TOOLS")
  for c in node "$@"; do command -v "$c" >/dev/null || missing+=("$c"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "FAIL: missing ${missing[*]}: run tools/setup.sh (or deploy/validate/install.sh)" >&2
    exit 1
  fi
}
