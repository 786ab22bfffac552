#!/usr/bin/env python3
"""Our CUDA block and attention against PyTorch eager on the same GPU, from the outputs of one
run_gpu_checks.sh run (issue 15, section 5):

  block      torch_block_bench.py's block_s / cuda_block_bench's block_s for F, B, W and BW
             (torch seconds / ours: >= 1.0 means we are as fast; goal 1.0x);
  attention  torch_block_bench.py's attention_s (SDPA's flash path) / attention_bench's
             "forward X ms/call" and "backward X ms/call" (goal 0.7x).

  block_vs_torch.py OURS_JSON TORCH_JSON ATTENTION_BENCH_OUTPUT [--table FILE]

Prints one line (the check's reason): every ratio, then "goal missed: ..." or "all goals met".
--table writes the figures behind it (ours, torch, both ratios) for the results file. Exit 0
when every figure was read, whether or not the goals are met; exit 1, naming the file and what
is missing, when a figure cannot be read or the two runs measured different shapes or devices.
"""
import argparse
import json
import re
import sys

PHASES = ("F", "B", "W", "BW")
BLOCK_GOAL = 1.0
ATTENTION_GOAL = 0.7


class Unreadable(Exception):
    pass


def load_json(path, what):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise Unreadable(f"{what} ({path}): {e.strerror}")
    try:
        return json.loads(text)
    except ValueError:
        first = text.strip().splitlines()[0] if text.strip() else "(empty)"
        raise Unreadable(f"{what} ({path}) is not JSON: {first[:200]}")


def seconds(obj, path, what):
    """obj[path[0]][path[1]]...: a positive number of seconds."""
    value = obj
    for key in path:
        if not isinstance(value, dict) or key not in value:
            raise Unreadable(f"{what} has no {'.'.join(path)}")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise Unreadable(f"{what}: {'.'.join(path)} is {value!r}, not a positive number of seconds")
    return float(value)


def attention_seconds(path):
    """attention_bench's forward and backward ms/call, in seconds, and its shape."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise Unreadable(f"attention_bench output ({path}): {e.strerror}")
    out = {}
    for phase, word in (("F", "forward"), ("B", "backward")):
        m = re.search(rf"^{word}\s+([0-9.]+) ms/call", text, re.MULTILINE)
        if not m:
            raise Unreadable(f"attention_bench output ({path}) has no '{word} X ms/call' line")
        out[phase] = float(m.group(1)) / 1e3
        if not out[phase] > 0:
            raise Unreadable(f"attention_bench output ({path}): {word} is {m.group(1)} ms/call")
    m = re.search(r"batch (\d+) seq (\d+) heads (\d+) head_dim (\d+)", text)
    if not m:
        raise Unreadable(f"attention_bench output ({path}) does not name its shape (batch B seq S heads N head_dim D)")
    shape = dict(zip(("batch", "seq", "heads", "head_dim"), map(int, m.groups())))
    return out, shape


def compare(ours_path, torch_path, attention_path):
    """(reason line, table lines); raises Unreadable."""
    ours = load_json(ours_path, "cuda_block_bench output")
    torch = load_json(torch_path, "torch_block_bench output")
    for key in ("shape", "dtype", "device"):
        if ours.get(key) != torch.get(key):
            raise Unreadable(f"the two benchmarks measured different {key}s: ours {ours.get(key)!r}, "
                             f"torch {torch.get(key)!r}")
    attention, attention_shape = attention_seconds(attention_path)
    s = torch.get("shape")
    if not isinstance(s, dict) or not all(isinstance(s.get(k), int) and s[k] > 0
                                          for k in ("batch", "seq", "hidden", "heads")):
        raise Unreadable(f"torch_block_bench output: shape {s!r} lacks batch, seq, hidden or heads")
    want = {"batch": s.get("batch"), "seq": s.get("seq"), "heads": s.get("heads"),
            "head_dim": s["hidden"] // s["heads"]}
    if attention_shape != want:
        raise Unreadable(f"attention_bench measured {attention_shape}, torch_block_bench {want}")

    rows, missed, ratios = [], [], []
    ours_best = {p: seconds(ours, ("block_s", p), "cuda_block_bench output") for p in PHASES}
    ours_median = {p: seconds(ours, ("block_s_median", p), "cuda_block_bench output") for p in PHASES}
    for p in PHASES:
        t = seconds(torch, ("block_s", p), "torch_block_bench output")
        r = t / ours_best[p]
        ratios.append(f"{p} {r:.2f}x")
        ok = r >= BLOCK_GOAL
        if not ok:
            missed.append(p)
        rows.append((f"block {p}", ours_best[p], ours_median[p], t, r, t / ours_median[p], BLOCK_GOAL, ok))
    line = f"block vs PyTorch eager (torch s / ours s, goal >= {BLOCK_GOAL:.1f}x): " + ", ".join(ratios)
    ratios = []
    for p in ("F", "B"):
        t = seconds(torch, ("attention_s", p), "torch_block_bench output")
        r = t / attention[p]
        ratios.append(f"{p} {r:.2f}x")
        ok = r >= ATTENTION_GOAL
        if not ok:
            missed.append(f"attention {p}")
        rows.append((f"attention {p}", attention[p], None, t, r, None, ATTENTION_GOAL, ok))
    backend = torch.get("attention_backend")
    line += (f"; attention vs {torch.get('attention', 'torch')}"
             f"{' (' + backend + ')' if backend else ''} (goal >= {ATTENTION_GOAL:.1f}x): " + ", ".join(ratios))
    default = torch.get("attention_default_s")
    if isinstance(default, dict):  # SDPA's own choice of kernel, shown beside the goal's baseline
        shown = []
        for p in ("F", "B"):
            t = seconds(torch, ("attention_default_s", p), "torch_block_bench output")
            rows.append((f"attn {p} dflt", attention[p], None, t, t / attention[p], None, None, None))
            shown.append(f"{p} {t / attention[p]:.2f}x")
        line += "; vs SDPA's default choice (no goal): " + ", ".join(shown)
    line += ("; goal missed: " + ", ".join(missed)) if missed else "; all goals met"

    def ms(v):
        return f"{v * 1e3:9.3f}" if v is not None else " " * 9

    def x(v):
        return f"{v:9.3f}x" if v is not None else " " * 10

    table = [f"{'':12} {'ours ms':>9} {'median':>9} {'torch ms':>9} {'torch/ours':>10} {'(medians)':>10}  goal"]
    for name, o, om, t, r, rm, goal, ok in rows:
        verdict = f">= {goal:.1f}x {'met' if ok else 'missed'}" if goal is not None else "(no goal)"
        table.append(f"{name:12} {ms(o)} {ms(om)} {ms(t)} {x(r)} {x(rm)}  {verdict}")
    table.append(f"ours: cuda_block_bench, best of {ours.get('reps', '?')} after {ours.get('warmup', '?')} warm-up "
                 f"(median beside it); W timed alone after B (ours BW - B: "
                 f"{(ours_best['BW'] - ours_best['B']) * 1e3:.3f} ms)")
    table.append("torch: torch_block_bench medians; its W is BW - B; its attention alone, like ours "
                 "(attention_bench), ms per call over back-to-back calls, best of 3 rounds")
    table.append(f"device {torch['device']}, {torch['dtype']}, shape {json.dumps(torch['shape'])}")
    return line, table


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("ours", help="cuda_block_bench's stdout (JSON)")
    p.add_argument("torch", help="torch_block_bench.py's stdout (JSON)")
    p.add_argument("attention", help="attention_bench's stdout")
    p.add_argument("--table", help="write the figures behind the ratios here")
    args = p.parse_args(argv)
    try:
        line, table = compare(args.ours, args.torch, args.attention)
    except Unreadable as e:
        print(f"cannot compare: {e}")
        return 1
    print(line)
    if args.table:
        with open(args.table, "w") as f:
            f.write("\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
