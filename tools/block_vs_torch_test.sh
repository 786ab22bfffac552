#!/usr/bin/env bash
# tools/block_vs_torch.py on the first H200 run's outputs (tools/block_vs_torch_test.py).
exec /usr/bin/python3 tools/block_vs_torch_test.py
