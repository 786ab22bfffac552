"""A PyTorch worker's checkpoints: one rank's stages (the user's modules) and their AdamW state at
a step boundary, in the C++ workers' per-rank file (data/rank_checkpoint.h), so the coordinator's
restart policy resumes a torch job as it resumes a built-in one (docs/pytorch.md).

    DIR/JOB/rank-G/step-N.safetensors   (G: the global rank, rank_layout.py)
    tensors  "stageK/NAME/value" for every entry of stage K's module.state_dict(), and
             "stageK/NAME/adam_m", "stageK/NAME/adam_v" (AdamW's exp_avg, exp_avg_sq) for its
             trainable parameters; NAME is the module's own state_dict name, the tensor its own
             dtype and shape (under tensor parallelism a DTensor's local shard: each tp rank
             writes its own file, and a restart with the same layout reads it back). Under
             ZeRO-1 (ZeroRedundancyOptimizer, which gives each replica whole parameters to step)
             a rank writes the moments of the parameters it steps only; a restart with another
             dp reads every old replica's file of its coordinates and takes each moment from the
             one that holds it
    __metadata__ {"format": "pipecoord-rank-checkpoint", "version": "1", "step": "N",
                  "optimizer_steps": "S" (AdamW's step count), "fnv1a64": FNV-1a of the data}

    writer = CheckpointWriter(dir, job_id, global_rank)   # keeps the newest file + the restart point's
    writer.save(runner, step)                             # after the step's OPT
    resume(runner, dir, job_id, global_rank, step)        # before the first step of a restart
    resume(..., sources=[g0, g1])   # another dp (ZeRO): the old replicas' global ranks to read

Files are written to a temporary name, flushed and renamed (a reader sees a whole checkpoint or
none). The write is synchronous (the C++ worker's is in the background): the step's telemetry
reports its own checkpoint. The FNV-1a hash is computed byte by byte in Python (about 10 MB/s).
"""
import os

import torch
from torch.distributed.tensor import DTensor

from pipecoord.safetensors_io import encode_safetensors, header_bytes, read_metadata, read_safetensors
from pipecoord.synthetic_data import fnv1a64

FORMAT = "pipecoord-rank-checkpoint"
KEPT = 1  # worker/daemon/checkpointing.h's kCheckpointsKept


def checkpoint_path(directory, job_id, global_rank, step):
    return os.path.join(directory, job_id, f"rank-{global_rank}", f"step-{step}.safetensors")


def optimizer_steps(runner):
    """The optimizer steps the rank took (AdamW's bias correction and the learning-rate schedule
    use it); 0 before the first step."""
    return runner.steps_done


def _local(t):
    """The tensor this rank holds of `t`: a DTensor's local shard (the same storage), else `t`."""
    t = t.detach()
    return t.to_local() if isinstance(t, DTensor) else t


def _stepped(runner):
    """(AdamW's state dict, {id(parameter): the tensor AdamW steps for it}) of the parameters this
    rank steps: every trainable one, or under ZeRO-1 its partition (a tensor-parallel parameter's
    local shard stands for it there, torch_stages.py)."""
    if runner.optimizer is None:
        return {}, {}
    if not runner.zero:
        return runner.optimizer.state, {id(p): p for p in runner.params}
    local = {id(t): p for p, t in runner.local_shards or ()}
    owned = [t for g in runner.optimizer.optim.param_groups for t in g["params"]]
    return runner.optimizer.optim.state, {id(local.get(id(t), t)): t for t in owned}


def rank_state(runner, every_moment=False):
    """{file name: tensor} of the rank's stages, stage by stage in state_dict order; the AdamW
    moments are zeros for a parameter the optimizer holds none for yet. DTensors as their local
    shards (views of the same storage). Moments of the parameters this rank steps; every_moment:
    the names of every trainable parameter's (what another dp's files may hold)."""
    trainable = {id(p) for p in runner.params}
    state, stepped = _stepped(runner)
    out = {}
    for stage in sorted(runner.modules):
        for name, t in runner.modules[stage].state_dict(keep_vars=True).items():
            key = f"stage{stage}/{name}"
            out[key + "/value"] = _local(t)
            if id(t) in trainable and (every_moment or id(t) in stepped):
                s = state.get(stepped.get(id(t)), {})
                out[key + "/adam_m"] = _local(s["exp_avg"]) if "exp_avg" in s else torch.zeros_like(_local(t))
                out[key + "/adam_v"] = _local(s["exp_avg_sq"]) if "exp_avg_sq" in s else torch.zeros_like(_local(t))
    return out


class CheckpointWriter:
    """One rank's checkpoints of one job attempt (worker/checkpoint/async_writer.h's policy)."""

    def __init__(self, directory, job_id, global_rank, keep=KEPT):
        self.directory, self.job_id, self.global_rank, self.keep = directory, job_id, global_rank, keep
        self.keep_from = None  # files of steps >= it are never deleted (the restart point)

    def keep_from_step(self, step):
        """The first call sets the floor, later ones only raise it (thread-safe enough: one int)."""
        self.keep_from = step if self.keep_from is None else max(self.keep_from, step)

    def save(self, runner, step):
        """Writes the checkpoint of `step` (its OPT ran) and deletes this rank's older files beyond
        the newest `keep`, except those at or after the restart point."""
        path = checkpoint_path(self.directory, self.job_id, self.global_rank, step)
        rank_dir = os.path.dirname(path)
        try:
            os.makedirs(rank_dir, exist_ok=True)
        except OSError as e:
            raise RuntimeError(f"checkpoint: cannot create {rank_dir}: {e.strerror}") from None
        header, data = encode_safetensors(rank_state(runner))
        meta = {"format": FORMAT, "version": "1", "step": str(step), "optimizer_steps": str(optimizer_steps(runner)),
                "fnv1a64": "%016x" % fnv1a64(data)}
        tmp = path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(header_bytes(header, meta))
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, path)
            fd = os.open(rank_dir, os.O_RDONLY)
            try:
                os.fsync(fd)  # the rename itself
            finally:
                os.close(fd)
        except OSError as e:
            raise RuntimeError(f"checkpoint: writing {path}: {e.strerror}") from None
        self._delete_old(rank_dir)

    def _delete_old(self, rank_dir):
        steps = set()
        for name in os.listdir(rank_dir):
            stem, ext = os.path.splitext(name)
            if stem.startswith("step-") and ext in (".safetensors", ".ckpt") and stem[5:].isdigit():
                steps.add(int(stem[5:]))
        floor = self.keep_from if self.keep_from is not None else float("inf")
        for step in sorted(steps, reverse=True)[max(self.keep, 1):]:
            if step < floor:
                for ext in (".safetensors", ".ckpt"):
                    try:
                        os.remove(os.path.join(rank_dir, f"step-{step}{ext}"))
                    except FileNotFoundError:
                        pass


def _read_file(path, step):
    """(the file's tensors, its optimizer steps), its format, checksum and step checked."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no checkpoint {path} (--checkpoint-dir must be the folder the job's workers "
                                "wrote, shared by every worker)")
    meta = read_metadata(path)
    if meta.get("format") != FORMAT or meta.get("version") != "1":
        raise ValueError(f'{path}: not a pipecoord rank checkpoint (its __metadata__ needs format "{FORMAT}", '
                         'version "1")')
    try:
        stored_step, opt_steps = int(meta["step"]), int(meta["optimizer_steps"])
    except (KeyError, ValueError):
        raise ValueError(f"{path}: not a pipecoord rank checkpoint (__metadata__ step and optimizer_steps must be "
                         "integers >= 0)") from None
    with open(path, "rb") as f:
        raw = f.read()
    data_start = 8 + int.from_bytes(raw[:8], "little")
    if meta.get("fnv1a64") != "%016x" % fnv1a64(raw[data_start:]):
        raise ValueError(f"{path}: checksum mismatch: the file is corrupt")
    if stored_step != step:
        raise ValueError(f"{path}: holds step {stored_step}, expected {step}")
    return read_safetensors(path), opt_steps


def resume(runner, directory, job_id, global_rank, step, sources=None):
    """Loads the checkpoint of `step` into the rank's modules and AdamW state: global rank
    `global_rank`'s file, or (a restart with another dp under ZeRO) the files of the global ranks
    in `sources`, each tensor from the first that holds it. Raises ValueError naming the file and
    the rule broken (not a rank checkpoint, corrupt, another step, the files' optimizer steps
    differ, a tensor missing, unknown or of another shape: the module is not the one that wrote
    it); FileNotFoundError naming the path when there is none."""
    files = []
    for g in sources if sources else [global_rank]:
        path = checkpoint_path(directory, job_id, g, step)
        files.append((path,) + _read_file(path, step))
    opt_steps = files[0][2]
    for path, _, steps in files[1:]:
        if steps != opt_steps:
            raise ValueError(f"{path}: {steps} optimizer steps, {files[0][0]} {opt_steps}")
    want = rank_state(runner)
    possible = rank_state(runner, every_moment=True)
    for path, stored, _ in files:
        for name in stored:
            if name not in possible:
                raise ValueError(f'{path}: tensor "{name}": not in this rank\'s stages (the module differs from the '
                                 "one that wrote the checkpoint)")
    found = {}
    for name, t in want.items():
        where = next(((path, stored) for path, stored, _ in files if name in stored), None)
        if where is None:
            raise ValueError(f'{files[0][0]}: tensor "{name}": missing' +
                             (f" (and in the {len(files) - 1} other replicas' files)" if len(files) > 1 else ""))
        path, stored = where
        if stored[name].shape != t.shape or stored[name].dtype != t.dtype:
            raise ValueError(f'{path}: tensor "{name}": {stored[name].dtype} {list(stored[name].shape)} in the file, '
                             f"the module has {t.dtype} {list(t.shape)}")
        found[name] = stored[name]
    with torch.no_grad():
        for stage in sorted(runner.modules):
            for name, t in runner.modules[stage].state_dict(keep_vars=True).items():
                _local(t).copy_(found[f"stage{stage}/{name}/value"])
    state, stepped = _stepped(runner)

    def moment(p, values):  # in the parameter's own kind: a DTensor parameter's is a DTensor
        values = values.to(p.device)
        if isinstance(p, DTensor):
            return DTensor.from_local(values, p.device_mesh, p.placements, run_check=False)
        return values
    for stage in sorted(runner.modules):
        for name, p in runner.modules[stage].state_dict(keep_vars=True).items():
            if id(p) not in stepped:
                continue
            key, t = f"stage{stage}/{name}", stepped[id(p)]
            # AdamW's own state entries (torch.optim.AdamW, not capturable: a float step)
            state[t] = {"step": torch.tensor(float(opt_steps)), "exp_avg": moment(t, found[key + "/adam_m"]),
                        "exp_avg_sq": moment(t, found[key + "/adam_v"])}
    runner.steps_done = opt_steps
    return opt_steps
