#!/usr/bin/env bash
# memory/'s Megatron recipe against Megatron-LM's theoretical memory formulas and megatron-core's
# own model (tests/memory_peers/megatron_peer.py says what each comparison is).
set -euo pipefail
source tests/python.sh  # PYTHON
"$PYTHON" tests/memory_peers/megatron_peer.py --pipectl cli/pipectl \
  --wheels "${PIPECOORD_VENV:-/var/cache/pipecoord/venv}/wheels"
