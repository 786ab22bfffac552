"""Checks .ci/run's counter on hand-written Bazel test logs: every rule of its docstring."""
import os
import subprocess
import sys
import tempfile

COUNTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "count_test_results.py")

PASS2 = '<testsuites><testsuite><testcase classname="A" name="x"/><testcase classname="A" name="y"/></testsuite></testsuites>'
ONE_FAIL = '<testsuites><testsuite><testcase classname="A" name="x"><failure message="boom"/></testcase><testcase classname="A" name="y"/></testsuite></testsuites>'
SKIP = '<testsuites><testsuite><testcase classname="D" name="gpu" result="skipped"><skipped message="no CUDA device"/></testcase></testsuite></testsuites>'
DISABLED = '<testsuites><testsuite><testcase classname="A" name="DISABLED_z" status="notrun" result="suppressed"/><testcase classname="A" name="x"/></testsuite></testsuites>'
SCRIPT_OK = '<testsuites><testsuite name="t" failures="0" errors="0"></testsuite></testsuites>'
SCRIPT_FAILED = '<testsuites><testsuite name="t" failures="1" errors="0"></testsuite></testsuites>'


def write(root, rel, text):
    path = os.path.join(root, rel, "test.xml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def run(root, labels, gpu=()):
    gpu_file = os.path.join(root, "gpu.txt")
    with open(gpu_file, "w") as fh:
        fh.write("\n".join(gpu) + "\n")
    out = subprocess.run([sys.executable, COUNTER, os.path.join(root, "logs"), gpu_file], input="\n".join(labels) + "\n",
                         capture_output=True, text=True, check=True)
    return tuple(int(n) for n in out.stdout.split()), out.stderr


def check(got, want, what):
    if got != want:
        print(f"FAIL {what}: got {got}, want {want}")
        sys.exit(1)
    print(f"ok   {what}: {got}")


def main():
    with tempfile.TemporaryDirectory() as root:
        logs = os.path.join(root, "logs")
        write(logs, "p/pass", PASS2)
        write(logs, "p/fail", ONE_FAIL)
        write(logs, "p/script", SCRIPT_OK)
        write(logs, "p/script_failed", SCRIPT_FAILED)
        write(logs, "p/skip", SKIP)
        write(logs, "p/disabled", DISABLED)
        write(logs, "p/sharded/shard_1_of_2", PASS2)
        write(logs, "p/sharded/shard_2_of_2", PASS2)
        write(logs, "p/half/shard_1_of_3", PASS2)
        write(logs, "p/half/shard_3_of_3", PASS2)

        check(run(root, ["//p:pass"])[0], (2, 0, 0), "gtest cases count one by one")
        check(run(root, ["//p:fail"])[0], (1, 1, 0), "a failed case")
        check(run(root, ["//p:script", "//p:script_failed"])[0], (1, 1, 0), "a script target is one case")
        counts, err = run(root, ["//p:missing"])
        check(counts, (0, 1, 0), "a target without test.xml fails")
        check("did not build or did not run" in err, True, "  and says why")
        check(run(root, ["//p:sharded"])[0], (4, 0, 0), "every shard summed")
        counts, err = run(root, ["//p:half"])
        check(counts, (0, 1, 0), "a shard that reported nothing fails the target")
        check("shard(s) [2] of 3" in err, True, "  and names the shard")
        counts, err = run(root, ["//p:skip"], gpu=["//p:skip"])
        check(counts, (0, 0, 1), "a skip in a gpu-tagged test is a skip")
        check("no CUDA device" in err, True, "  listed with its reason")
        counts, err = run(root, ["//p:skip"])
        check(counts, (0, 1, 0), "a skip elsewhere fails")
        check("not tagged gpu" in err, True, "  naming the rule")
        counts, err = run(root, ["//p:disabled"])
        check(counts, (1, 1, 0), "a DISABLED case is a skip, so it fails outside gpu tests")
        check(run(root, ["//p:disabled"], gpu=["//p:disabled"])[0], (1, 0, 1), "  and is a skip in one")
    print("all passed")


if __name__ == "__main__":
    main()
