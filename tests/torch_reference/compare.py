#!/usr/bin/python3
"""Recomputes what model_dump wrote with the PyTorch reference (python/pipecoord/reference_model.py)
and compares: logits, loss and every parameter's gradient of one micro-batch, the weights after
AdamW steps (microbatch mode, with weight decay), and a pipelined job's step losses, weights and
AdamW moments after its steps (pipelined mode) against the same steps run single-process.

    compare.py DUMP.safetensors... [--dtype float64|float32] [--tol 1e-5] [--rope-theta X]
               [--no-steps]

--no-steps checks one micro-batch's logits, loss and gradients only: PyTorch in float32 adds
rounding of its own that AdamW's ill-conditioned elements amplify as much as ours, so the weights
after steps are compared with PyTorch in float64 (the exact model from the same fp32 weights).

--rope-theta builds PyTorch's model with another RoPE base than the C++ one's (10000): the
test's proof that a wrong model fails.

Error of a tensor: max |ours - torch| / max |torch| (relative to the tensor's largest element,
so an element near zero does not divide by itself); losses: |ours - torch| / |torch|. Prints
one line per quantity (the worst tensor named) and exits 1 if any error exceeds --tol.

Weights after AdamW steps leave out the elements AdamW is ill-conditioned on: those whose
bias-corrected second moment sqrt(v / (1 - beta2^t)) was, after some step t, nonzero and below
0.1 % of the tensor's largest gradient at that step (measured by PyTorch). The update
lr m / (sqrt(v) + eps) moves such an element by lr x (gradient difference) / sqrt(v): our fp32
gradients' 2e-7 of the tensor's largest gradient become 2e-4 x lr of a weight there, above the
tolerance, so the optimizer's conditioning, not the model, decides the result. Gradients are
checked on every element (one micro-batch's directly; a pipelined step's through the AdamW
moments, which are linear in them). The left-out elements are counted and printed, and at most
2 % of a model's elements may be left out; elements whose gradient was exactly 0 throughout stay
in (their weights must match too). A left-out element can still differ by 2 lr (AdamW's first
step is lr x sign(gradient), and a gradient within fp32 rounding of zero has no reliable sign),
which changes the next steps' gradients everywhere: so where the dump has each step's weights
(microbatch mode: "step/<t>/"), PyTorch starts each step from ours after the step before, and
every step's weights are checked on their own.
"""
import argparse
import sys
import warnings

import torch

from pipecoord.reference_model import ModelShape, Stage, load_weights, make_adamw
from pipecoord.safetensors_io import read_metadata, read_safetensors


def rel(got, want):
    got, want = got.double(), want.double()
    scale = want.abs().max().item()
    diff = (got - want).abs().max().item()
    return diff / scale if scale > 0 else diff


class Report:
    def __init__(self, tol):
        self.tol, self.failed = tol, False

    def check(self, what, errors):
        """errors: {name: relative error}; prints the worst."""
        name, worst = max(errors.items(), key=lambda kv: kv[1])
        ok = worst <= self.tol
        self.failed |= not ok
        print("%-4s %-34s worst %.3e (%s) over %d tensor(s)" %
              ("ok" if ok else "FAIL", what, worst, name, len(errors)))


def batch(tensors, step, mb):
    key = "data/%d/%d/" % (step, mb)
    return tensors[key + "inputs"].long(), tensors[key + "targets"].long()


ILL_CONDITIONED = 1e-3  # sqrt(v-hat) below this share of the tensor's largest |gradient|


def compare_weights(report, what, tensors, prefix, model, ill):
    errors, left_out, total = {}, 0, 0
    for n, p in model.named_parameters():
        keep = ~ill[n]
        left_out += int((~keep).sum())
        total += p.numel()
        want = p.detach().double()
        got = tensors[prefix + n].double()
        scale = want.abs().max().item()
        errors[n] = ((got - want).abs() * keep).max().item() / scale
    report.check(what, errors)
    ok = left_out <= total // 50
    report.failed |= not ok
    print("%-4s %-34s %d of %d elements (sqrt(v-hat) in (0, %g max|g|) after a step)" %
          ("ok" if ok else "FAIL", "  left out as ill-conditioned", left_out, total, ILL_CONDITIONED))


def optimizer_from(meta, model, opt, steps):
    """spec.optimizer as PyTorch runs it: AdamW with the job's betas, eps and weight decay
    (norm gains left out), the learning-rate schedule from PyTorch's own schedulers (LinearLR
    warmup, then CosineAnnealingLR or LinearLR decay, joined by SequentialLR), and the clipping
    threshold for clip_grad_norm_. Returns (scheduler or None, threshold)."""
    lr = float(meta["lr"])
    for g in opt.param_groups:
        g["betas"] = (float(meta["beta1"]), float(meta["beta2"]))
        g["eps"] = float(meta["eps"])
    warmup, decay = int(meta["warmup_steps"]), int(meta["decay_steps"])
    decay = decay if decay > 0 else max(1, steps - warmup)
    min_lr, kind = float(meta["min_lr"]), meta["lr_schedule"]
    sched = torch.optim.lr_scheduler
    if kind == "cosine":
        after = sched.CosineAnnealingLR(opt, T_max=decay, eta_min=min_lr)
    elif kind == "linear":
        after = sched.LinearLR(opt, start_factor=1.0, end_factor=min_lr / lr, total_iters=decay)
    else:
        after = sched.ConstantLR(opt, factor=1.0, total_iters=0)
    if warmup > 1:
        # SequentialLR steps the second scheduler with an epoch at the milestone, which 1.13 warns of.
        warnings.filterwarnings("ignore", message="The epoch parameter", category=UserWarning)
        ramp = sched.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup - 1)
        after = sched.SequentialLR(opt, [ramp, after], milestones=[warmup])
    elif warmup == 1:
        raise SystemExit("compare.py: warmup 1 is lr x 1/1 = lr: use 0 or >= 2 here")
    return after, float(meta["clip_grad_norm"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--rope-theta", type=float, default=0.0)
    ap.add_argument("--no-steps", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    report = Report(args.tol)
    for dump in args.dumps:
        compare(dump, getattr(torch, args.dtype), args, report)
    sys.exit(1 if report.failed else 0)


def compare(dump, dtype, args, report):
    meta = read_metadata(dump)
    t = read_safetensors(dump)
    shape = ModelShape(layers=int(meta["layers"]), hidden=int(meta["hidden"]), heads=int(meta["heads"]),
                       vocab=int(meta["vocab"]), seq_len=int(meta["seq_len"]),
                       ffn_hidden=int(meta["ffn_hidden"]), rope_theta=args.rope_theta,
                       kv_heads=int(meta.get("kv_heads", 0)), qkv_bias=meta.get("qkv_bias", "0") == "1",
                       sliding_window=int(meta.get("sliding_window", 0)))
    model = Stage(shape, dtype=dtype)
    load_weights(model, {k[len("init/"):]: v for k, v in t.items() if k.startswith("init/")})
    steps, m = int(meta["steps"]), int(meta["microbatches"])
    opt = make_adamw(model, lr=float(meta["lr"]), weight_decay=float(meta["weight_decay"]))
    sched, clip = None, 0.0
    if "lr_schedule" in meta:  # spec.optimizer: PyTorch's own AdamW, schedulers and clipping
        sched, clip = optimizer_from(meta, model, opt, steps)
    print("%s: %s, torch %s in %s, tolerance %g" %
          (dump, meta.get("schedule", "one micro-batch"), torch.__version__, args.dtype, args.tol))

    if "logits" in t:  # microbatch mode: one micro-batch's outputs and gradients first
        inputs, targets = batch(t, 0, 0)
        with torch.no_grad():
            logits = model(inputs)
        report.check("logits", {"logits": rel(t["logits"], logits.reshape(-1, shape.vocab))})
    if args.no_steps:
        steps, m = 1, 1

    losses, norms, lrs = [], [], []
    ill = {n: torch.zeros_like(p, dtype=torch.bool) for n, p in model.named_parameters()}
    beta2 = opt.defaults["betas"][1]
    for step in range(steps):
        if step > 0 and "step/%d/output.weight" % step in t:
            # Each step starts from our weights after the one before: an element whose update
            # the conditioning rule below leaves out (its first step is lr x sign(gradient), and
            # that sign can differ between two correct fp32 runs) must not steer the later steps'
            # gradients away from ours, so every step is checked on its own.
            load_weights(model, {n: t["step/%d/%s" % (step, n)] for n, _ in model.named_parameters()})
        opt.zero_grad(set_to_none=False)
        step_loss = 0.0
        for mb in range(m):
            inputs, targets = batch(t, step, mb)
            loss = model(inputs, targets)
            (loss / m).backward()
            step_loss += loss.item()
            if step == 0 and "loss" in t:
                report.check("loss", {"loss": rel(t["loss"], loss.detach().reshape(1))})
                report.check("gradients (one micro-batch)",
                             {n: rel(t["grad/" + n], p.grad) for n, p in model.named_parameters()})
        losses.append(step_loss / m)
        if args.no_steps:
            return
        # The global norm every step reports (clip_grad_norm_ returns it before clipping).
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), clip if clip > 0 else float("inf")).item())
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched is not None:
            sched.step()
        for n, p in model.named_parameters():
            rms = (opt.state[p]["exp_avg_sq"].double() / (1 - beta2 ** (step + 1))).sqrt()
            ill[n] |= (rms > 0) & (rms < ILL_CONDITIONED * p.grad.abs().max().item())
        if "step/%d/output.weight" % (step + 1) in t and step + 1 < steps:
            compare_weights(report, "weights after AdamW step %d" % (step + 1), t,
                            "step/%d/" % (step + 1), model, ill)
    report.check("step losses", {"step %d" % i: rel(t["losses"][i:i + 1], torch.tensor([l]))
                                 for i, l in enumerate(losses)})
    if "grad_norms" in t and "lr_schedule" in meta:
        report.check("global gradient norms", {"step %d" % i: rel(t["grad_norms"][i:i + 1], torch.tensor([n], dtype=torch.float64))
                                               for i, n in enumerate(norms)})
        report.check("learning rates", {"step %d" % i: rel(t["learning_rates"][i:i + 1], torch.tensor([r], dtype=torch.float64))
                                        for i, r in enumerate(lrs)})
    if "trained/" + "output.weight" in t:
        compare_weights(report, "weights after %d AdamW steps" % steps, t, "trained/", model, ill)
    if "final/output.weight" in t:
        compare_weights(report, "weights after %d AdamW steps" % steps, t, "final/", model, ill)
        state = {n: opt.state[p] for n, p in model.named_parameters()}
        report.check("AdamW first moments", {n: rel(t["final_adam_m/" + n], s["exp_avg"])
                                             for n, s in state.items()})
        report.check("AdamW second moments", {n: rel(t["final_adam_v/" + n], s["exp_avg_sq"])
                                              for n, s in state.items()})


if __name__ == "__main__":
    main()
