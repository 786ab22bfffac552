#!/usr/bin/python3
"""Runs the examples in docs: every ```console block whose first line is "$ pipectl ..." is run
with the given pipectl binary and its output compared with the block's (or, with --update,
written into the block). Blocks of commands that need a live coordinator are marked
```console-live and are not run here (tests/ covers them).

    tools/docs_examples.py --pipectl PATH [--update] docs/schedules.md ...
"""
import argparse
import re
import shlex
import subprocess
import sys

BLOCK = re.compile(r"```console\n\$ (pipectl [^\n]*)\n(.*?)```", re.S)


def run(pipectl, command):
    args = shlex.split(command)
    args[0] = pipectl
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipectl", required=True)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    failures = checked = 0
    for path in a.files:
        text = open(path).read()

        def replace(m):
            nonlocal failures, checked
            checked += 1
            got = run(a.pipectl, m.group(1))
            if not a.update and got != m.group(2):
                failures += 1
                print(f"{path}: `{m.group(1)}` printed something else:\n--- docs\n{m.group(2)}--- now\n{got}",
                      file=sys.stderr)
            return f"```console\n$ {m.group(1)}\n{got}```"

        new = BLOCK.sub(replace, text)
        if a.update and new != text:
            open(path, "w").write(new)
    print(f"docs examples: {checked} run, {failures} differ")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
