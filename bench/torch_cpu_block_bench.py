#!/usr/bin/env python3
"""Our CPU backend's transformer block against PyTorch eager on the CPU, same machine, same
shapes, same run: F, B and W per layer and the ratio of F+B+W (goal: ours >= 1.5x PyTorch's
speed).

Ours: bench/cpu_block_bench (the C++ block of worker/model/ on kernels/cpu/, GEMMs on OpenBLAS
with the thread count it reports). PyTorch: python/pipecoord/reference_model.Block, the same
model, fp32, torch.set_num_threads(--threads), timed as a zero-bubble pipeline runs it:
  F   forward keeping the autograd graph;
  B   torch.autograd.grad(y, x, dy): the input gradient only;
  W   BW - B, BW being the full backward (PyTorch cannot run the weight gradients alone after B
      without keeping a second graph; bench/torch_block_bench.py does the same).
Each figure is the best of --reps after one warm-up. --threads sets both torch.set_num_threads
and OpenBLAS's own pool (openblas_set_num_threads: torch.set_num_threads alone leaves PyTorch's
GEMMs on every core with Debian's build). PyTorch from PyPI (tools/requirements.txt, 2.11.0)
runs its GEMMs on the MKL linked into it; a Debian build of PyTorch on the BLAS behind
libblas.so.3 (printed either way; LD_PRELOAD of a libblas.so.3 is taken out of our binary's
environment).

  bazel build -c opt //bench:cpu_block_bench
  /var/cache/pipecoord/venv/bin/python bench/torch_cpu_block_bench.py --ours bazel-bin/bench/cpu_block_bench \\
      --shape demo --shape issue --shape large
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import torch



def _reference_model():
    """python/pipecoord/reference_model.py, loaded by path: the package's __init__ imports the
    gRPC client, which needs generated protos this benchmark has no use for."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "pipecoord",
                        "reference_model.py")
    spec = importlib.util.spec_from_file_location("reference_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ref = _reference_model()
Block, ModelShape = _ref.Block, _ref.ModelShape

SHAPES = {  # batch, seq, hidden, heads
    "demo": (4, 32, 64, 4),        # examples/job.json's block (tools/demo.sh)
    "issue": (2, 128, 256, 4),     # the baseline
    "large": (2, 512, 1024, 16),   # h 1024, s 512
}


def blas_library():
    """The BLAS PyTorch's GEMMs run on: the one its build names (PyPI's wheels link MKL into
    libtorch_cpu, which torch.set_num_threads governs), else the shared object this process loaded
    (Debian's builds use libblas.so.3)."""
    import re
    built = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    if built and built.group(1) != "open":
        return "%s, linked into PyTorch (torch.set_num_threads sets its threads)" % built.group(1)
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line}
    return ", ".join(sorted(libs)) or "none found"


def set_blas_threads(threads):
    """torch.set_num_threads does not reach OpenBLAS's own thread pool: PyTorch 1.13's GEMMs ran on
    every core (2 here) while the benchmark said 1 thread. Sets it through OpenBLAS's entry point
    and returns the count OpenBLAS then reports (None for a BLAS without one, e.g. netlib's, which
    is single-threaded)."""
    import ctypes
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    for path in libs:
        lib = ctypes.CDLL(path)
        if hasattr(lib, "openblas_set_num_threads"):
            lib.openblas_set_num_threads(threads)
            return lib.openblas_get_num_threads()
    return None


def best(fn, reps):
    fn()
    out = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def torch_block(batch, seq, hidden, heads, reps):
    torch.manual_seed(0)
    shape = ModelShape(layers=1, hidden=hidden, heads=heads, vocab=16, seq_len=seq)
    block = Block(shape, torch.float32)
    for p in block.parameters():  # weights of a trained model's scale, not ones and defaults
        torch.nn.init.uniform_(p, -0.05, 0.05) if p.dim() > 1 else torch.nn.init.ones_(p)
    x0 = torch.rand(batch, seq, hidden) * 2 - 1
    dy = torch.rand(batch, seq, hidden) * 2 - 1
    state = {}

    def forward():
        x = x0.clone().requires_grad_(True)
        state["x"], state["y"] = x, block(x)

    def backward_input():
        torch.autograd.grad(state["y"], state["x"], dy)

    def backward_full():
        block.zero_grad(set_to_none=False)
        state["y"].backward(dy)

    f = best(forward, reps)
    b = best(lambda: (forward(), backward_input()), reps) - f
    bw = best(lambda: (forward(), backward_full()), reps) - f
    return {"f": f, "b": b, "w": max(bw - b, 0.0), "bw": bw}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="the cpu_block_bench binary")
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="repeatable; default all")
    ap.add_argument("--threads", type=int, default=1, help="PyTorch's threads and ours (default 1)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    blas_threads = set_blas_threads(args.threads)
    env = dict(os.environ, PIPECOORD_CPU_THREADS=str(args.threads))
    env.pop("LD_PRELOAD", None)  # a preloaded BLAS is for PyTorch (e.g. netlib's, the baseline)
    print("PyTorch %s eager, %d thread(s), BLAS threads %s; its BLAS: %s" % (
        torch.__version__, torch.get_num_threads(),
        blas_threads if blas_threads is not None else "1 (no OpenBLAS)", blas_library()))
    results = []
    for name in args.shape or list(SHAPES):
        batch, seq, hidden, heads = SHAPES[name]
        out = subprocess.run([args.ours, "--batch", str(batch), "--seq", str(seq), "--hidden", str(hidden),
                              "--heads", str(heads), "--reps", str(args.reps)],
                             env=env, check=True, capture_output=True, text=True).stdout
        ours = json.loads(out)
        theirs = torch_block(batch, seq, hidden, heads, args.reps)
        total_ours = ours["f"] + ours["b"] + ours["w"]
        total_torch = theirs["f"] + theirs["bw"]
        speedup = total_torch / total_ours
        print("%s: b %d s %d h %d heads %d ffn %d; ours %d GEMM thread(s), PyTorch %d thread(s) "
              "(BLAS %s)" % (name, batch, seq, hidden, heads, ours["ffn"], ours["gemm_threads"],
                             args.threads, blas_threads if blas_threads is not None else 1))
        for k in ("f", "b", "w"):
            print("  %s  ours %9.5f s   PyTorch %9.5f s   ours %.2fx PyTorch's speed" %
                  (k.upper(), ours[k], theirs[k], theirs[k] / ours[k] if ours[k] > 0 else float("inf")))
        print("  F+B+W  ours %9.5f s   PyTorch %9.5f s   ours %.2fx PyTorch's speed (goal >= 1.5x): %s" %
              (total_ours, total_torch, speedup, "ok" if speedup >= 1.5 else "MISSED"))
        results.append({"shape": name, "ours": ours, "torch": theirs, "speedup": speedup})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
