"""The project's Python in a genrule's cmd: the virtual environment tools/python_env.sh makes from
tools/requirements.txt (PyTorch, numpy, transformers, safetensors, megatron-core, ...), as
tests/python.sh names it for shell tests. $$ keeps the shell variable from Bazel's expansion."""

PROJECT_PYTHON = "$${PIPECOORD_VENV:-/var/cache/pipecoord/venv}/bin/python"
