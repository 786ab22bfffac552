#!/usr/bin/env bash
# python/ as a Python package (pyproject.toml, setup.py): built into a wheel (the stubs generated
# from proto/ by grpcio-tools inside it), installed into an empty folder, and used from a directory
# with neither the checkout nor bazel-bin on PYTHONPATH: the client talks to a real coordinator
# (submits a job, reads it back, lists workers), the PyTorch worker answers --help as a module and
# as the pipecoord-torch-worker command, and the installed `proto` is the wheel's.
source tests/lib.sh
src="$WORK/src"
mkdir -p "$src"
cp -rL python proto "$src/"  # a writable copy: setuptools builds in the source tree
rm -rf "$src/python/examples"
"$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation --disable-pip-version-check -w "$WORK/dist" "$src/python" \
  > "$WORK/wheel.log" 2>&1 || fail "pip wheel python/: $(tail -5 "$WORK/wheel.log")"
wheel=$(ls "$WORK"/dist/pipecoord-*.whl)
"$PYTHON" -m zipfile -l "$wheel" > "$WORK/wheel.txt"
for f in proto/job_pb2.py proto/worker_pb2_grpc.py proto/__init__.py pipecoord/client.py pipecoord/torch_worker.py; do
  grep -q " *$f " "$WORK/wheel.txt" || grep -q "^$f" "$WORK/wheel.txt" || fail "the wheel lacks $f: $(cat "$WORK/wheel.txt")"
done
"$PYTHON" -m pip install --quiet --no-deps --disable-pip-version-check --target "$WORK/site" "$wheel" \
  > "$WORK/install.log" 2>&1 || fail "pip install of the wheel: $(tail -5 "$WORK/install.log")"

start_coordinator
runner="$PWD"
cd "$WORK"  # nothing of the checkout on the path from here
PYTHONPATH="$WORK/site" "$PYTHON" - "$PIPECOORD_ADDR" "$WORK/site" <<'PY' || fail "the installed client"
import sys
import proto.job_pb2
import pipecoord
from pipecoord import Client, InvalidArgument
addr, site = sys.argv[1:3]
assert proto.job_pb2.__file__.startswith(site), proto.job_pb2.__file__  # the wheel's stubs
with Client(addr) as c:
    spec = {"name": "pkg", "schedule": "1f1b", "pp": 2, "microbatches": 4, "microBatchSize": 2,
            "steps": 2, "learningRate": 0.01, "model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8}}
    job = c.submit(spec)
    got = c.get(job)
    assert got.id == job and got.state == "PENDING", got
    assert c.workers() == [], c.workers()
    try:
        c.submit(dict(spec, pp=0))
        raise SystemExit("an invalid spec was accepted")
    except InvalidArgument as e:
        assert "spec.pp" in str(e), e
print(f"installed client: submitted {job} ({got.state}), workers listed, a bad spec refused by name")
PY
PYTHONPATH="$WORK/site" "$PYTHON" -m pipecoord.torch_worker --help > "$WORK/help1.txt" || fail "python -m pipecoord.torch_worker --help"
PYTHONPATH="$WORK/site" "$PYTHON" "$WORK/site/bin/pipecoord-torch-worker" --help > "$WORK/help2.txt" ||
  fail "pipecoord-torch-worker --help"
grep -q -- "--coordinator" "$WORK/help1.txt" && cmp -s "$WORK/help1.txt" "$WORK/help2.txt" ||
  fail "the worker's help: $(head -5 "$WORK/help1.txt")"
cd "$runner"
echo "python package: ok ($(basename "$wheel"))"
