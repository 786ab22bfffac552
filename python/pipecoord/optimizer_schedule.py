"""The optimizer a job runs, step by step, from its JobSpec (learningRate and spec.optimizer):
the twin of jobplan/optimizer_schedule.h for PyTorch workers. Step k is the k-th optimizer update
(0-based). With lr = learningRate, W = warmupSteps, D = decaySteps (0: steps - W, at least 1) and
p = clamp((k - W) / D, 0, 1):

    k < W       lr (k + 1) / W
    constant    lr
    cosine      minLr + (lr - minLr) (1 + cos(pi p)) / 2
    linear      lr - (lr - minLr) p

AdamW's betas default to (0.9, 0.95) and eps to 1e-8 (kernels/cpu/adamw.h); weightDecay applies to
tensors of two or more dimensions (matrices, embeddings), never to norm gains or biases.
"""
import math

DEFAULT_BETAS = (0.9, 0.95)
DEFAULT_EPS = 1e-8


def adamw_settings(spec):
    """(betas, eps, weight_decay, clip_grad_norm) of a JobSpec (proto)."""
    o = spec.optimizer
    beta1 = o.beta1 if o.HasField("beta1") else DEFAULT_BETAS[0]
    beta2 = o.beta2 if o.HasField("beta2") else DEFAULT_BETAS[1]
    eps = o.eps if o.HasField("eps") else DEFAULT_EPS
    return (beta1, beta2), eps, o.weight_decay, o.clip_grad_norm


def lr_at(spec, k):
    """The learning rate of optimizer step k (0-based)."""
    o, lr = spec.optimizer, spec.learning_rate
    warmup = o.warmup_steps
    if k < warmup:
        return lr * (k + 1) / warmup
    decay = o.decay_steps if o.decay_steps > 0 else max(1, spec.steps - warmup)
    p = min(max((k - warmup) / decay, 0.0), 1.0)
    if o.lr_schedule == "cosine":
        return o.min_lr + (lr - o.min_lr) * (1 + math.cos(math.pi * p)) / 2
    if o.lr_schedule == "linear":
        return lr - (lr - o.min_lr) * p
    return lr
