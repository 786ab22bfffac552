"""The package rules (docs/architecture.md): which top-level package may use which.

Checked two ways on the source tree: every #include of a library's own sources (tests excluded),
and every dependency label of a non-test rule in its BUILD file (cc_library, cc_binary). A test
may use anything. The tree is found from this test's runfiles (a symlink to the workspace), so the
test reads the sources as they are now (tagged "external": never cached).

Run: bazel test //tools:package_rules_test
"""
import os
import re
import sys
import tempfile

# Package -> the packages its libraries and binaries may use (itself included).
ALLOWED = {
    "common": {"common"},
    "proto": {"proto"},
    "schedules": {"common", "schedules"},
    "memory": {"common", "memory", "schedules"},
    "planner": {"common", "memory", "planner", "schedules"},
    "kernels": {"common", "kernels"},
    # Not pure: reads and writes dataset and weight files (memory for its JSON reader).
    "data": {"common", "data", "memory"},
    # data: only its pure :formats (data/job_data_spec.h, spec.data in plain values).
    "jobplan": {"common", "data", "jobplan", "memory", "planner", "proto", "schedules"},
    "cli": {"cli", "common", "data", "jobplan", "memory", "planner", "proto", "schedules"},
    # data: it checks a job's datasets at submit, before any worker starts.
    "coordinator": {"common", "coordinator", "data", "jobplan", "kernels", "memory", "planner", "proto", "schedules"},
    # data: token datasets and safetensors weights (init, checkpoints) read memory-mapped.
    "worker": {"common", "data", "jobplan", "kernels", "memory", "proto", "schedules", "worker"},
}
TEST_RULES = ("cc_test", "sh_test", "py_test")


def rule_blocks(text):
    """(kind, body) of each top-level rule call, found by matching parentheses."""
    for m in re.finditer(r"^(\[?)(\w+)\(", text, re.M):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        yield m.group(2), text[m.end():i]


def violations(root):
    found = []
    for package, allowed in sorted(ALLOWED.items()):
        top = os.path.join(root, package)
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if name.endswith((".cc", ".h", ".cu", ".cuh")) and not name.endswith("_test.cc"):
                    for n, line in enumerate(open(path, errors="replace"), 1):
                        m = re.match(r'\s*#include "([a-z_]+)/', line)
                        if m and m.group(1) in ALLOWED and m.group(1) not in allowed:
                            found.append('%s:%d: includes "%s/...": %s may use only %s'
                                         % (rel, n, m.group(1), package, ", ".join(sorted(allowed))))
                if name == "BUILD":
                    for kind, body in rule_blocks(open(path).read()):
                        if kind in TEST_RULES or "testonly = True" in body:
                            continue
                        for label in re.findall(r'"//([a-z_]+)[/:"]', body):
                            if label in ALLOWED and label not in allowed:
                                found.append("%s: a %s depends on //%s: %s may use only %s"
                                             % (rel, kind, label, package, ", ".join(sorted(allowed))))
    return found


def self_check():
    """The checker finds what it should in a small tree of our own."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "worker/daemon"))
        with open(os.path.join(root, "worker/daemon/run.cc"), "w") as f:
            f.write('#include "worker/daemon/run.h"\n#include "coordinator/coordinator.h"\n')
        with open(os.path.join(root, "worker/daemon/run_test.cc"), "w") as f:
            f.write('#include "coordinator/coordinator.h"\n')  # tests may
        with open(os.path.join(root, "worker/daemon/BUILD"), "w") as f:
            f.write('cc_library(\n    name = "run",\n    deps = ["//coordinator:core", "//jobplan"],\n)\n'
                    'cc_test(\n    name = "run_test",\n    deps = ["//coordinator:core"],\n)\n')
        got = violations(root)
    allowed = "common, data, jobplan, kernels, memory, proto, schedules, worker"
    want = ['worker/daemon/BUILD: a cc_library depends on //coordinator: worker may use only ' + allowed,
            'worker/daemon/run.cc:2: includes "coordinator/...": worker may use only ' + allowed]
    assert sorted(got) == sorted(want), got


def main():
    self_check()
    root = os.path.dirname(os.path.realpath("WORKSPACE"))
    if not os.path.isdir(os.path.join(root, "jobplan")):
        print("cannot find the source tree from %s" % os.path.realpath("WORKSPACE"), file=sys.stderr)
        return 1
    found = violations(root)
    for v in found:
        print(v, file=sys.stderr)
    if found:
        print("%d package rule(s) broken (docs/architecture.md)" % len(found), file=sys.stderr)
        return 1
    print("package rules hold: %d packages checked in %s" % (len(ALLOWED), root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
