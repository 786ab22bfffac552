#!/usr/bin/env bash
# The eager recipe against PyTorch 2 running transformers' LlamaDecoderLayer
# (tests/memory_peers/torch_eager.py says what each comparison is).
set -euo pipefail
source tests/python.sh  # PYTHON
"$PYTHON" tests/memory_peers/torch_eager.py --pipectl cli/pipectl
