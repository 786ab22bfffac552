#!/usr/bin/env python3
"""PyTorch eager timings of pipecoord's Llama block: the baseline issue 15 compares our CUDA
kernels with (per layer F, B, W; attention against scaled_dot_product_attention's flash path).

The block is the one worker/model/transformer_block.h computes: RMSNorm, q/k/v projections, RoPE
on q and k, causal multi-head attention, output projection, residual; RMSNorm, SwiGLU MLP
(w1 gate, w3 up, w2 down), residual. No biases.

Phases, as a zero-bubble pipeline runs them:
  F   the block's forward, keeping its autograd graph;
  B   the input gradient only: torch.autograd.grad(y, x, dy) computes no weight gradient GEMM
      (autograd prunes what the requested inputs do not need);
  BW  the input and every weight gradient in one backward;
  W   reported as BW - B (PyTorch cannot run the weight gradients alone after B without keeping
      a second graph; this is the share of BW that the weight gradients add).
Each phase is timed with CUDA events (or the wall clock on the CPU) as the median of --reps runs
after --warmup runs. Prints one JSON object (and writes it to --out when given).

  python3 bench/torch_block_bench.py --device cuda --dtype bf16      # h 4096, s 2048, 32 heads
  /usr/bin/python3 bench/torch_block_bench.py --device cpu --dtype f32 --hidden 64 --seq 16 \\
      --heads 4 --ffn 128 --reps 3                                       # a smoke run anywhere
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def rms_norm(x, gain, eps):
    # Statistics in fp32 whatever the storage dtype, as our kernels do.
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * gain


def rope_tables(seq, head_dim, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float64) / head_dim))
    ang = torch.outer(torch.arange(seq, device=device, dtype=torch.float64), inv)
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope(x, cos, sin):
    # x [b, s, heads, d]; rotates interleaved pairs (2i, 2i + 1), as kernels/cpu/rotary does.
    xf = x.float()
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)
    return out.to(x.dtype)


def attention(q, k, v, use_sdpa):
    # q, k, v [b, s, heads, d] -> [b, s, heads * d]
    b, s, n, d = q.shape
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    if use_sdpa:
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    else:
        scores = (qt.float() @ kt.float().transpose(-1, -2)) / math.sqrt(d)
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
        o = (probs @ vt.float()).to(q.dtype)
    return o.transpose(1, 2).reshape(b, s, n * d)


class Block(torch.nn.Module):
    def __init__(self, hidden, heads, ffn, seq, dtype, device, use_sdpa):
        super().__init__()
        def w(out, inp):
            return torch.nn.Parameter(torch.randn(out, inp, device=device, dtype=dtype) / math.sqrt(inp))
        self.attention_norm = torch.nn.Parameter(torch.ones(hidden, device=device, dtype=dtype))
        self.ffn_norm = torch.nn.Parameter(torch.ones(hidden, device=device, dtype=dtype))
        self.wq, self.wk, self.wv, self.wo = (w(hidden, hidden) for _ in range(4))
        self.w1, self.w3 = w(ffn, hidden), w(ffn, hidden)
        self.w2 = w(hidden, ffn)
        self.heads = heads
        self.cos, self.sin = rope_tables(seq, hidden // heads, 10000.0, device)
        self.use_sdpa = use_sdpa

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        a = rms_norm(x, self.attention_norm, 1e-5)
        q = rope((a @ self.wq.t()).view(b, s, self.heads, d), self.cos, self.sin)
        k = rope((a @ self.wk.t()).view(b, s, self.heads, d), self.cos, self.sin)
        v = (a @ self.wv.t()).view(b, s, self.heads, d)
        x1 = x + attention(q, k, v, self.use_sdpa) @ self.wo.t()
        c = rms_norm(x1, self.ffn_norm, 1e-5)
        return x1 + (F.silu(c @ self.w1.t()) * (c @ self.w3.t())) @ self.w2.t()


class Timer:
    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def time(self, fn):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


def back_to_back_time(timer, fn, warmup, calls=10, rounds=3):
    # Per call over `calls` calls queued back to back, best of `rounds`: kernels_cuda's
    # attention_bench's statistic, so a short kernel is not charged for Python's launch gaps.
    for _ in range(warmup):
        fn()

    def many():
        for _ in range(calls):
            fn()

    return min(timer.time(many) for _ in range(rounds)) / calls


def median_time(timer, fn, warmup, reps):
    for _ in range(warmup):
        fn()
    return statistics.median(timer.time(fn) for _ in range(reps))


def block_flops(b, s, h, ffn):
    # Forward GEMMs (2 m n k each) plus causal attention's two products (half of s x s).
    tokens = b * s
    gemm = 2 * tokens * (4 * h * h + 3 * h * ffn)
    attn = 2 * 2 * b * s * s * h / 2
    return gemm + attn, gemm, attn


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--ffn", type=int, default=11008)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    p.add_argument("--out", help="also write the JSON here")
    args = p.parse_args(argv)

    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device visible to PyTorch " + torch.__version__}))
        return 2
    if args.hidden % args.heads != 0:
        p.error("--hidden must be a multiple of --heads")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    torch.manual_seed(0)
    block = Block(args.hidden, args.heads, args.ffn, args.seq, dtype, device, use_sdpa=has_sdpa)
    params = list(block.parameters())
    x = torch.randn(args.batch, args.seq, args.hidden, device=device, dtype=dtype, requires_grad=True)
    dy = torch.randn_like(x)
    timer = Timer(device)

    def forward():
        with torch.no_grad():
            block(x)

    def forward_keep():
        return block(x)

    def b_only():
        y = block(x)
        torch.autograd.grad(y, x, dy)

    def b_and_w():
        y = block(x)
        torch.autograd.grad(y, [x] + params, dy)

    f_s = median_time(timer, forward_keep, args.warmup, args.reps)
    f_nograd_s = median_time(timer, forward, args.warmup, args.reps)
    fb_s = median_time(timer, b_only, args.warmup, args.reps)
    fbw_s = median_time(timer, b_and_w, args.warmup, args.reps)
    b_s = max(fb_s - f_s, 0.0)
    bw_s = max(fbw_s - f_s, 0.0)
    total, gemm, attn = block_flops(args.batch, args.seq, args.hidden, args.ffn)
    result = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "dtype": args.dtype,
        "shape": {"batch": args.batch, "seq": args.seq, "hidden": args.hidden, "heads": args.heads, "ffn": args.ffn},
        "attention": "scaled_dot_product_attention" if has_sdpa else "eager softmax (no SDPA in this PyTorch)",
        "block_s": {"F": f_s, "F_no_grad": f_nograd_s, "B": b_s, "BW": bw_s, "W": max(bw_s - b_s, 0.0)},
        "block_forward_tflops": total / f_s / 1e12 if f_s > 0 else None,
        "forward_flops": {"total": total, "gemm": gemm, "attention": attn},
    }
    # Attention alone: the flash path's forward and backward at the block's shape.
    d = args.hidden // args.heads
    q, k, v = (torch.randn(args.batch, args.seq, args.heads, d, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))
    do = torch.randn(args.batch, args.seq, args.hidden, device=device, dtype=dtype)

    def attn_f():
        with torch.no_grad():
            attention(q, k, v, has_sdpa)

    def attn_fb():
        o = attention(q, k, v, has_sdpa)
        torch.autograd.grad(o, (q, k, v), do)

    # Timed back to back (10 calls, best of 3), as attention_bench times ours.
    # The baseline is SDPA's flash path (FlashAttention-2 in PyTorch): forced when this
    # PyTorch can (torch.nn.attention, 2.2 and later, on CUDA); SDPA's own choice is timed too.
    def timed_attention():
        af = back_to_back_time(timer, attn_f, args.warmup)
        afb = back_to_back_time(timer, attn_fb, args.warmup)
        return {"F": af, "B": max(afb - af, 0.0)}

    default_s = timed_attention()
    flash_s, backend = default_s, "SDPA's default choice (the flash path cannot be forced here)"
    if has_sdpa and device.type == "cuda":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                flash_s = timed_attention()
            backend = "SDPBackend.FLASH_ATTENTION"
        except (ImportError, RuntimeError) as e:
            backend += ": " + str(e).splitlines()[0]
    result["attention_backend"] = backend
    result["attention_s"] = flash_s
    result["attention_default_s"] = default_s
    af = flash_s["F"]
    result["attention_forward_tflops"] = attn / af / 1e12 if af > 0 else None
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
