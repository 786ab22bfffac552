"""Checks that a Dockerfile's runtime stage installs every Debian package a binary links.

    runtime_libs.py DOCKERFILE BINARY

The packages come from this machine (the Debian 12 the build stage also uses): ldd finds the
libraries, dpkg -S their packages; a package counts as installed if the final stage's
`apt-get install` names it or one of the packages it names depends on it (dpkg's Depends, read
recursively), or if debian:bookworm-slim has it already. Exit 1 naming what is missing.
"""
import os
import re
import subprocess
import sys

IN_SLIM_BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}


def package_of(path):
    out = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
    if out.returncode != 0:
        out = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True, check=True)
    return out.stdout.split(":")[0]


def depends(package):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Depends},${Pre-Depends}", package],
                         capture_output=True, text=True)
    names = re.findall(r"(?:^|[,|]\s*)([a-z0-9][a-z0-9+.-]+)", out.stdout)
    return {n for n in names}


def main(dockerfile, binary):
    text = open(dockerfile).read()
    final_stage = re.split(r"^FROM ", text, flags=re.M)[-1]
    listed = set()
    for command in re.split(r"&&|;|\n", re.sub(r"\\\n", " ", final_stage)):
        if "apt-get install" in command:
            words = command.split("apt-get install", 1)[1].split()
            listed |= {w for w in words if re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", w)}
    closure, todo = set(), list(listed)
    while todo:
        p = todo.pop()
        if p not in closure:
            closure.add(p)
            todo.extend(depends(p))
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"=> (/\S+)", ldd)
    needed = {package_of(lib) for lib in libs}
    missing = sorted(needed - closure - IN_SLIM_BASE)
    print(f"{os.path.basename(dockerfile)}: {len(libs)} libraries from {len(needed)} packages; "
          f"runtime stage installs {sorted(listed)}")
    if missing:
        print(f"FAIL: {dockerfile}: the runtime stage lacks {missing} (linked by {binary})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
