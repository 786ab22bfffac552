"""A job's model, data and batch split run under PyTorch's own pipelining runtime
(torch.distributed.pipelining), the peer pipecoord's PyTorch workers are compared with: one process
per pipeline rank over gloo on loopback, the reference model's stages (python/examples/
reference_stages.py, weights seeded by global name, so any split trains the same model), the
step's micro-batches of pipecoord's synthetic stream (python/pipecoord/synthetic_data.py, the C++
stream bit for bit) concatenated and split again by the schedule, mean next-token cross-entropy,
AdamW with the settings pipecoord's torch workers use for a spec without `optimizer`.

    peer_run.py JOB_JSON SCHEDULE OUT_JSON [--dump-csv FILE]
        SCHEDULE: gpipe, 1f1b, interleaved, zb-interleaved, zbv or dualpipev, PyTorch's class for
        it (SCHEDULES); --dump-csv writes that class's schedule as PyTorch's compute-only CSV
        (_dump_csv) for pipecoord to import.
    peer_run.py JOB_JSON csv OUT_JSON --load-csv FILE
        runs a CSV schedule (pipecoord's `pipectl schedule --format csv`: computation and
        communication) on PyTorch's _PipelineScheduleRuntime (_load_csv "compute_comms"); each
        rank's stages are the ones its row names.

OUT_JSON: {"schedule": PyTorch's class, "losses": [...], "step_s": [...] (the slowest rank's wall
time of each step), "bubble": [...] (each step's 1 - the ranks' compute time / (ranks x step_s),
compute being its stages' forward_one_chunk, backward_one_chunk and backward_weight_one_chunk), "peak_bytes": [...] (per rank: parameters, gradients and AdamW state plus the most
bytes of tensors autograd held saved at once during a step, as pipecoord's torch workers count
theirs)}.
"""
import json
import os
import socket
import sys
import time
import weakref

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed import pipelining

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "examples"))
from reference_stages import build_stage  # noqa: E402
from pipecoord.stage_api import ModelSpec, StageShard  # noqa: E402
from pipecoord.synthetic_data import SyntheticData  # noqa: E402

# pipecoord's schedule name -> (PyTorch's class, virtual stages per rank, placement).
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", 1, "flat"),
    "1f1b": ("Schedule1F1B", 1, "flat"),
    "interleaved": ("ScheduleInterleaved1F1B", 2, "loop"),
    "zb-interleaved": ("ScheduleInterleavedZeroBubble", 2, "loop"),
    "zbv": ("ScheduleZBVZeroBubble", 2, "v"),
    "dualpipev": ("ScheduleDualPipeV", 2, "v"),
}


def csv_stages(path):
    """Each row's (rank's) stages, from the leading digits of its cells."""
    rows = []
    for line in open(path):
        stages = set()
        for cell in line.strip().split(","):
            cell = cell.strip().strip('"').lstrip("(")
            digits = cell[:len(cell) - len(cell.lstrip("0123456789"))]
            if digits:
                stages.add(int(digits))
        rows.append(sorted(stages))
    return rows


def stages_of(rank, pp, vpp, placement):
    if placement == "flat":
        return [rank]
    if placement == "loop":
        return [rank + k * pp for k in range(vpp)]
    return [rank, 2 * pp - 1 - rank]  # V: down on the first chunk, back up on the second


def _without_self_sends(init_ops):
    """PyTorch 2.11's stages open their links with a dummy send and receive to each neighbouring
    stage's rank, even when that is their own (a V schedule's two middle stages share a rank):
    NCCL takes it, gloo refuses a pair to itself ("Pair is not connected"). Those dummies only
    warm links up; a stage's transfers to a stage of its own rank are local in the runtime."""
    def ops(self):
        me = dist.get_rank(self.group)
        return [op for op in init_ops(self) if op.group_peer != me and op.peer != me]
    return ops


pipelining.PipelineStage._get_init_p2p_neighbors_ops = _without_self_sends(
    pipelining.PipelineStage._get_init_p2p_neighbors_ops)


# Each process's compute time (forward, input and weight backward: what a stage computes), for the
# measured bubble 1 - busy / (ranks x step), as pipecoord measures its own.
_busy = [0.0]


def _timed(method):
    def run(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            _busy[0] += time.perf_counter() - t0
    return run


for _name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
    setattr(pipelining.stage._PipelineStageBase, _name, _timed(getattr(pipelining.stage._PipelineStageBase, _name)))


class _Held:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor):
        self.tensor = tensor


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def run_rank(rank, pp, job, schedule, port, out_dir, load_csv, dump_csv):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=pp)
    if load_csv:
        rows = csv_stages(load_csv)
        cls_name, vpp = "_PipelineScheduleRuntime", len(rows[0])
    else:
        cls_name, vpp, placement = SCHEDULES[schedule]
    ms = job["model"]
    model = ModelSpec(layers=ms["layers"], hidden=ms["hidden"], heads=ms["heads"], vocab=ms["vocab"],
                      seq_len=ms["seqLen"], seed=int(ms["seed"]))
    n = pp * vpp
    if ms["layers"] % n:
        raise SystemExit(f"{ms['layers']} layers do not split evenly over {n} stages")
    per = ms["layers"] // n
    mine = rows[rank] if load_csv else stages_of(rank, pp, vpp, placement)
    modules = [build_stage(StageShard(s, s * per, per, s == 0, s == n - 1), model) for s in mine]
    stages = [pipelining.PipelineStage(mod, s, n, torch.device("cpu")) for mod, s in zip(modules, mine)]
    m = job["microbatches"]
    has_reduce_grad = bool(load_csv) and "REDUCE_GRAD" in open(load_csv).read()
    if load_csv:
        sched = pipelining.schedules._PipelineScheduleRuntime(stages, n_microbatches=m, loss_fn=loss_fn)
        sched._load_csv(load_csv, format="compute_comms")
    else:
        cls = getattr(pipelining, cls_name)
        sched = cls(stages if vpp > 1 else stages[0], n_microbatches=m, loss_fn=loss_fn)
    if dump_csv and rank == 0:
        if isinstance(sched, pipelining.schedules._PipelineScheduleRuntime):
            sched._dump_csv(dump_csv, format="compute_only")
        else:
            sched._dump_csv(dump_csv)
    params = [p for mod in modules for p in mod.parameters()]
    opt = torch.optim.AdamW(params, lr=job["learningRate"], betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    data = SyntheticData(int(ms["seed"]), ms["vocab"], ms["seqLen"], job["microBatchSize"])
    first, last = 0 in mine, n - 1 in mine
    # Memory between steps' starts: parameters, gradients and AdamW state, plus what autograd
    # saves while the step runs (saved_tensors_hooks, as pipecoord's torch workers count it).
    # A saved tensor counts from F's pack until autograd drops it (the holder's finalizer).
    held = {"now": 0, "peak": 0}

    def release(n):
        held["now"] -= n

    def pack(t):
        n = t.numel() * t.element_size()
        held["now"] += n
        held["peak"] = max(held["peak"], held["now"])
        holder = _Held(t)
        weakref.finalize(holder, release, n)
        return holder

    losses, step_s, bubble, peak = [], [], [], 0
    for step in range(job["steps"]):
        batch = [data.batch(step, i) for i in range(m)]
        tokens = torch.cat([t for t, _ in batch])
        targets = torch.cat([y for _, y in batch])
        mb_losses = []
        args = (tokens,) if first else ()
        kwargs = {"target": targets, "losses": mb_losses} if last else {}
        dist.barrier()
        _busy[0] = 0.0
        t0 = time.perf_counter()
        held["peak"] = held["now"]
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda holder: holder.tensor):
            sched.step(*args, **kwargs)
        if load_csv and not has_reduce_grad:
            # PyTorch's runtime divides the gradients by the micro-batches only at a REDUCE_GRAD
            # action; a pipecoord CSV has none (a job's plan adds them with dp > 1). Done here as
            # PyTorch's named schedules do at the end of their step.
            for st in stages:
                st.scale_grads(m)
        opt.step()
        opt.zero_grad(set_to_none=False)
        elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        step_s.append(float(elapsed[0]))
        busy = torch.tensor([_busy[0]], dtype=torch.float64)
        dist.all_reduce(busy, op=dist.ReduceOp.SUM)
        bubble.append(1.0 - float(busy[0]) / (pp * float(elapsed[0])))
        state = sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values() if torch.is_tensor(t))
        fixed = sum(p.numel() * p.element_size() * 2 for p in params)  # values and gradients
        peak = max(peak, fixed + state + held["peak"])
        if last:
            losses.append(sum(float(x.detach()) for x in mb_losses) / m)
    peaks = [torch.zeros(1, dtype=torch.int64) for _ in range(pp)]
    dist.all_gather(peaks, torch.tensor([peak], dtype=torch.int64))
    if last:
        with open(os.path.join(out_dir, "peer.json"), "w") as f:
            json.dump({"schedule": cls_name, "losses": losses, "step_s": step_s, "bubble": bubble,
                       "peak_bytes": [int(p[0]) for p in peaks]}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("job")
    ap.add_argument("schedule")
    ap.add_argument("out")
    ap.add_argument("--load-csv")
    ap.add_argument("--dump-csv")
    a = ap.parse_args()
    if a.load_csv:
        if a.schedule != "csv":
            raise SystemExit("--load-csv runs the file's schedule: give SCHEDULE csv")
    elif a.schedule not in SCHEDULES:
        raise SystemExit(f"schedule {a.schedule!r}: PyTorch's runtime is run here for {sorted(SCHEDULES)} or csv")
    elif not hasattr(pipelining, SCHEDULES[a.schedule][0]):
        raise SystemExit(f"torch {torch.__version__} has no {SCHEDULES[a.schedule][0]}")
    job = json.load(open(a.job))
    pp = job["pp"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out_dir = os.path.dirname(os.path.abspath(a.out))
    load = os.path.abspath(a.load_csv) if a.load_csv else None
    dump = os.path.abspath(a.dump_csv) if a.dump_csv else None
    mp.spawn(run_rank, args=(pp, job, a.schedule, port, out_dir, load, dump), nprocs=pp, join=True)
    os.replace(os.path.join(out_dir, "peer.json"), a.out)


if __name__ == "__main__":
    main()
