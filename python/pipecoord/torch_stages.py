"""The compute half of a PyTorch worker: a rank's stages (the user's modules) and the F, B, W,
BW and OPT steps on them, as the C++ worker's ComputeBackend does them (worker/daemon/
compute_backend.h); no communication here (torch_executor.py moves the tensors).

- F keeps the micro-batch's graph: the input (a leaf that requires grad, except the token ids of
  the first stage) and the output (on the head stage the loss, divided by the micro-batches of
  the step: gradients accumulate over them, as the C++ model's dloss = 1/m).
- B: the input gradient only, with PyTorch's own split (torch.distributed.pipelining's
  stage_backward_input, as its zero-bubble schedules run it): the gradients that reach the nodes
  where the weights' paths branch off are kept, the rest of the graph goes. The first stage has
  no input gradient: its B only keeps the output gradient.
- W: the parameters' gradients from those kept gradients (stage_backward_weight), added to .grad,
  so B + W cost about one BW (a block at h 256, s 128: B + W 1.10x BW; walking the graph again
  from the output, as under PyTorch 1.13, cost 1.56x), with bit-identical gradients. The first
  stage's W is its whole backward (torch.autograd.grad(output, params, grad)).
- BW: both at once, torch.autograd.backward.
- Gradients for data parallel (torch_executor.py averages them over the replicas): one stage's
  (REDUCE_GRAD) or the rank's every stage's (OPT without REDUCE_GRAD), as the .grad tensors
  themselves; a parameter with no gradient yet gets zeros, so every replica reduces the same list.
- OPT: torch.optim.AdamW over every stage of the rank with the job's settings
  (optimizer_schedule.py: spec.optimizer's betas, eps, weight decay on tensors of 2+ dimensions,
  the step's learning rate), after the global gradient norm (summed over `norm_group`, the
  replica's pipeline ranks) and clipping (spec.optimizer.clipGradNorm, as clip_grad_norm_);
  then the gradients are zeroed. With spec.zero 1 over `dp_group`, PyTorch's
  ZeroRedundancyOptimizer: each replica keeps the AdamW state of its share of the parameters and
  broadcasts what it updated. Under tensor parallelism (DTensor parameters, which it cannot
  broadcast) it steps each parameter's local shard: the same storage, its .grad the DTensor
  gradient's local shard in the parameter's placement, set before each step; the replicas of one
  tp rank hold the same shapes, so they partition alike.

Activation recompute (spec.recompute "full"): every block of each stage (the entries of the
module's `layers`, a ModuleList or ModuleDict: the convention of Hugging Face's, torchtitan's and
the reference model) is wrapped in PyTorch's own activation checkpointing
(apply_activation_checkpointing, non-reentrant): F keeps each block's input only, and the backward
(B, or BW) runs the block's forward again. The same kernels on the same inputs, so the same bits;
with the B/W split, W may rebuild a block again. A module without `layers` is refused by name.

Memory (what the rank's StepSummary reports): on CUDA, torch.cuda's allocated/peak/reserved
bytes; on the CPU, parameters, their gradients and AdamW's states plus the bytes the kept graphs
hold (counted by saved_tensors_hooks while F runs).
"""
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (apply_activation_checkpointing,
                                                                         checkpoint_wrapper)
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
# PyTorch's own B/W split (a private module of torch.distributed.pipelining; tools/requirements.txt
# pins the version it was written against).
from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

from pipecoord.optimizer_schedule import adamw_settings, lr_at

def _local_bytes(t):
    """Bytes this rank holds of `t` (a DTensor: its local shard)."""
    if isinstance(t, DTensor):
        t = t.to_local()
    return t.numel() * t.element_size()


def head_loss(module, out, targets):
    """The head stage's loss of one micro-batch: the module's own loss(out, targets) when it has
    one, else the mean next-token cross-entropy (training's F and validation's forward both)."""
    loss_fn = getattr(module, "loss", None)
    if callable(loss_fn):
        return loss_fn(out, targets)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), targets.reshape(-1))


def recompute_blocks(module, stage):
    """Wraps each block of `module` (the entries of its `layers`) in activation checkpointing;
    ValueError naming the stage when it has no such blocks."""
    layers = getattr(module, "layers", None)
    if isinstance(layers, torch.nn.ModuleDict):
        blocks = list(layers.values())
    elif isinstance(layers, torch.nn.ModuleList):
        blocks = list(layers)
    else:
        raise ValueError(f"spec.recompute \"full\": stage {stage}'s module has no `layers` (a ModuleList or "
                         "ModuleDict of its blocks), whose blocks full recompute checkpoints")
    wrapped = {id(b) for b in blocks}
    apply_activation_checkpointing(module, checkpoint_wrapper_fn=checkpoint_wrapper,
                                   check_fn=lambda m: id(m) in wrapped)


class _Saved:
    """One micro-batch's graph on one stage."""

    __slots__ = ("input", "output", "grad", "param_groups", "bytes")

    def __init__(self):
        self.input = self.output = self.grad = self.param_groups = None
        self.bytes = 0


class StageRunner:
    """The stages of one rank. `modules`: {stage: torch.nn.Module}, `shards`: {stage: StageShard}."""

    def __init__(self, modules, shards, microbatches, spec, device, dp_group=None, norm_group=None):
        """spec: the JobSpec (its learningRate, optimizer and zero); dp_group: the replicas' process
        group (ZeRO-1 shards over it); norm_group: the ranks the global gradient norm is summed over
        (this replica's pipeline ranks; None: this rank alone)."""
        self.modules, self.shards, self.m, self.device = modules, shards, microbatches, torch.device(device)
        self.tp_rank = next(iter(shards.values())).tp_rank if shards else 0
        if getattr(spec, "recompute", "") == "full":
            for stage in sorted(modules):
                recompute_blocks(modules[stage], stage)
        params = [p for s in sorted(modules) for p in modules[s].parameters() if p.requires_grad]
        self.params = params
        self.spec, self.norm_group, self.steps_done = spec, norm_group, 0
        betas, eps, weight_decay, self.clip = adamw_settings(spec)
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        groups = [g for g in groups if g["params"]]
        self.zero = spec.zero >= 1 and dp_group is not None
        self.local_shards = None  # ZeRO under tensor parallelism: [(DTensor parameter, its local shard)]
        if self.zero and any(isinstance(p, DTensor) for p in params):
            with torch.no_grad():  # to_local outside autograd: the local tensor itself, a leaf
                self.local_shards = [(p, p.to_local()) for p in params if isinstance(p, DTensor)]
            local = {id(p): t for p, t in self.local_shards}
            groups = [{**g, "params": [local.get(id(p), p) for p in g["params"]]} for g in groups]
        if not params:
            self.optimizer = None
        elif self.zero:
            self.optimizer = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, process_group=dp_group,
                                                     lr=lr_at(spec, 0), betas=betas, eps=eps)
        else:
            self.optimizer = torch.optim.AdamW(groups, lr=lr_at(spec, 0), betas=betas, eps=eps)
        self.last_grad_norm = self.last_lr = None
        self.saved = {}  # (stage, mb) -> _Saved
        self.loss_sum, self.has_loss = 0.0, False
        self.graph_bytes = 0
        self.peak_graph_bytes = 0

    # --- the actions ---
    def forward(self, stage, mb, x, targets=None):
        """x: token ids (first stage) or the previous stage's activations. Returns the output to
        send on (detached), or None on the head stage."""
        module, shard = self.modules[stage], self.shards[stage]
        saved = _Saved()
        if not shard.has_embedding:
            x = x.detach().requires_grad_(True)
            saved.input = x

        def pack(t):
            saved.bytes += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = module(x)
            if shard.has_head:
                loss = head_loss(module, out, targets)
                self.loss_sum += float(loss.detach())
                self.has_loss = True
                out = loss / self.m
        saved.output = out
        self._keep((stage, mb), saved)
        return None if shard.has_head else out.detach()

    def backward_input(self, stage, mb, grad):
        """B: the gradient for the previous stage (None on the first stage)."""
        saved = self.saved[(stage, mb)]
        if saved.input is None:
            saved.grad = grad
            return None
        (dx,), saved.param_groups = stage_backward_input([saved.output], [grad], [saved.input],
                                                          self._trainable(stage))
        saved.input.grad = None  # dx goes to the previous stage; the leaf need not hold it
        return dx

    def backward_weight(self, stage, mb):
        saved = self._take((stage, mb))
        params = self._trainable(stage)
        if saved.param_groups is not None:
            stage_backward_weight(iter(params), saved.param_groups)
            return
        grads = torch.autograd.grad(saved.output, params, grad_outputs=saved.grad, allow_unused=True)
        for p, g in zip(params, grads):
            if g is None:
                continue
            if p.grad is None:
                p.grad = g.detach().clone()
            else:
                p.grad.add_(g)

    def backward_full(self, stage, mb, grad):
        saved = self._take((stage, mb))
        torch.autograd.backward(saved.output, grad_tensors=grad)
        return None if saved.input is None else saved.input.grad

    def _trainable(self, stage):
        return [p for p in self.modules[stage].parameters() if p.requires_grad]

    def stage_gradients(self, stage):
        """The .grad tensors of `stage`'s trainable parameters, in parameter order."""
        return self._gradients(self.modules[stage].parameters())

    def all_gradients(self):
        """The .grad tensors of every trainable parameter of the rank, stage by stage."""
        return self._gradients(self.params)

    @staticmethod
    def _gradients(params):
        """Under tensor parallelism a parameter's gradient is a DTensor: its local shard (a view
        of the same storage) is what the replicas average."""
        grads = []
        for p in params:
            if not p.requires_grad:
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad)
        return grads

    def _grad_square(self):
        """This rank's share of the global gradient norm's square: a tensor-parallel shard's local
        squares, and a parameter every rank of the group holds whole (one the split left alone,
        the norms, or a replicated DTensor) counted on tp rank 0 only, so the sum over the group
        counts it once."""
        total = 0.0
        for p in self.params:
            g = p.grad
            if g is None:
                continue
            sharded = isinstance(g, DTensor) and any(pl.is_shard() for pl in g.placements)
            if not sharded and self.tp_rank != 0:
                continue
            if isinstance(g, DTensor):
                g = g.to_local()
            total += float(g.double().pow(2).sum())
        return total

    def optimizer_step(self):
        """The global gradient norm (kept as last_grad_norm), clipping, and the AdamW step at this
        step's learning rate (last_lr)."""
        lr = lr_at(self.spec, self.steps_done)
        total = torch.tensor([self._grad_square()], dtype=torch.float64)
        if self.norm_group is not None:
            dist.all_reduce(total, op=dist.ReduceOp.SUM, group=self.norm_group)
        norm = math.sqrt(float(total[0]))
        if self.clip > 0:
            coef = self.clip / (norm + 1e-6)
            if coef < 1:
                for p in self.params:
                    if p.grad is not None:
                        p.grad.mul_(coef)
        if self.optimizer is not None:
            for g in self.optimizer.param_groups:
                g["lr"] = lr
            with torch.no_grad():
                for p, t in self.local_shards or ():
                    g = p.grad
                    if g is not None and g.placements != p.placements:
                        # e.g. a vocabulary-parallel embedding's gradient comes back Replicate:
                        # this rank's rows of it (a local slice; no communication for Replicate)
                        g = g.redistribute(p.device_mesh, p.placements)
                    t.grad = None if g is None else g.to_local()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=False)
            for p, _ in self.local_shards or ():  # a redistributed gradient was a copy
                if p.grad is not None:
                    p.grad.zero_()
        self.steps_done += 1
        self.last_grad_norm, self.last_lr = norm, lr

    def optimizer_state_bytes(self):
        """Bytes of AdamW state this rank holds (under ZeRO-1 its share only)."""
        if self.optimizer is None:
            return 0
        state = self.optimizer.optim.state if self.zero else self.optimizer.state
        return sum(_local_bytes(t) for s in state.values() for t in s.values() if torch.is_tensor(t))

    def step_loss(self):
        """The mean loss over the step's micro-batches (head stage), or None; resets it."""
        if not self.has_loss:
            return None
        loss = self.loss_sum / self.m
        self.loss_sum, self.has_loss = 0.0, False
        return loss

    # --- memory ---
    def reset_peak(self):
        self.peak_graph_bytes = self.graph_bytes
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def memory(self):
        """(in use, peak, reserved) bytes."""
        if self.device.type == "cuda":
            return (torch.cuda.memory_allocated(self.device), torch.cuda.max_memory_allocated(self.device),
                    torch.cuda.memory_reserved(self.device))
        state = self.optimizer_state_bytes()
        fixed = sum(2 * _local_bytes(p) for p in self.params) + state
        return fixed + self.graph_bytes, fixed + self.peak_graph_bytes, fixed + self.peak_graph_bytes

    def _keep(self, key, saved):
        if key in self.saved:
            raise RuntimeError(f"F of stage {key[0]} micro-batch {key[1]} ran twice before its backward")
        self.saved[key] = saved
        self.graph_bytes += saved.bytes
        self.peak_graph_bytes = max(self.peak_graph_bytes, self.graph_bytes)

    def _take(self, key):
        saved = self.saved.pop(key, None)
        if saved is None:
            raise RuntimeError(f"stage {key[0]} micro-batch {key[1]}: no forward graph to run the backward on")
        self.graph_bytes -= saved.bytes
        return saved
