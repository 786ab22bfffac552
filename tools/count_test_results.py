"""Counts passed, failed and skipped test cases from Bazel's test.xml files, honestly.

Usage: count_test_results.py TESTLOGS GPU_LABELS_FILE < labels

Reads the test labels of this tree (//pkg:name, one a line) on stdin, the bazel-testlogs folder
and a file listing the labels tagged "gpu". .ci/run deletes every test.xml before the tests run,
so each one found was written by this run. Rules:
  - a target without its XML (it did not build, or did not run) is one failure;
  - a sharded target must have every shard's XML (shard_I_of_N for I in 1..N), else a failure;
  - a gtest case that was skipped (GTEST_SKIP) or DISABLED_ (not run) counts as skipped;
  - skips are allowed only in targets tagged "gpu" (no device here); a skip anywhere else is a
    failure, since it would hide a regression.
Prints one line per problem and per skip on stderr, then "P F S" on stdout.
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET


def xml_paths(logs, label):
    """The target's test.xml files, or the reason they are not all there."""
    pkg, name = label[2:].split(":")
    base = os.path.join(logs, pkg, name)
    shards = glob.glob(os.path.join(base, "shard_*_of_*", "test.xml"))
    if not shards:
        path = os.path.join(base, "test.xml")
        return ([path], None) if os.path.exists(path) else ([], "no test.xml: it did not build or did not run")
    totals = {int(m.group(1)) for p in shards if (m := re.search(r"shard_\d+_of_(\d+)", p))}
    if len(totals) != 1:
        return [], "shards of different runs: " + ", ".join(sorted(map(str, totals)))
    n = totals.pop()
    missing = [i for i in range(1, n + 1) if not os.path.exists(os.path.join(base, f"shard_{i}_of_{n}", "test.xml"))]
    if missing:
        return [], f"shard(s) {missing} of {n} reported nothing"
    return sorted(shards), None


def count_file(path):
    """(passed, failed, [(case, why skipped)]) of one test.xml."""
    root = ET.parse(path).getroot()
    cases = root.findall(".//testcase")
    if not cases:  # a non-gtest target: Bazel writes one suite with the exit status
        failed = int(root.get("failures", 0)) + int(root.get("errors", 0))
        suite = root.find(".//testsuite")
        if suite is not None:
            failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        return (0, 1, []) if failed else (1, 0, [])
    p = f = 0
    skipped = []
    for case in cases:
        name = case.get("classname", "") + "." + case.get("name", "")
        skip = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            f += 1
        elif skip is not None or case.get("result") == "skipped":
            skipped.append((name, (skip.get("message", "") if skip is not None else "") or "skipped"))
        elif case.get("status") == "notrun" or case.get("result") == "suppressed":
            skipped.append((name, "DISABLED"))
        else:
            p += 1
    return p, f, skipped


def count(logs, label, gpu_labels, problems):
    """(passed, failed, skipped) of one target; problems get one line each."""
    paths, why = xml_paths(logs, label)
    if why:
        problems.append(f"FAILED {label}: {why}")
        return 0, 1, 0
    p = f = s = 0
    for path in paths:
        cp, cf, skipped = count_file(path)
        p, f = p + cp, f + cf
        for case, reason in skipped:
            if label in gpu_labels:
                s += 1
                problems.append(f"skipped {label} {case} (gpu): {reason}")
            else:
                f += 1
                problems.append(f"FAILED {label} {case}: skipped ({reason}) in a test not tagged gpu")
    return p, f, s


def main():
    logs = sys.argv[1]
    with open(sys.argv[2]) as fh:
        gpu_labels = {line.strip() for line in fh if line.strip()}
    totals = [0, 0, 0]
    problems = []
    for line in sys.stdin:
        label = line.strip()
        if label.startswith("//"):
            for i, n in enumerate(count(logs, label, gpu_labels, problems)):
                totals[i] += n
    for line in problems:
        print(line, file=sys.stderr)
    print(*totals)


if __name__ == "__main__":
    main()
