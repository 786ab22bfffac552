# The project's Python for tests that need PyTorch, numpy or the Python client in one
# interpreter: the virtual environment tools/python_env.sh makes from tools/requirements.txt
# (PyTorch 2.11, numpy, grpcio and protobuf pinned there). Sourced; sets PYTHON.
PYTHON=${PIPECOORD_VENV:-/var/cache/pipecoord/venv}/bin/python
[ -x "$PYTHON" ] || { echo "FAIL: $PYTHON not found: run tools/setup.sh (it makes the virtual environment)" >&2; exit 1; }
