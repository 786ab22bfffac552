"""Counts passed, failed and skipped test cases from Bazel's test.xml files.

Reads test labels (//pkg:name) on stdin and the bazel-testlogs folder as argv[1]. A target whose
XML is missing counts as one failure (it did not build or was not run); sharded targets
sum their shards. Prints "P F S".
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET


def count(logs, label):
    """(passed, failed, skipped) of one test target, summing its shards' results."""
    pkg, name = label[2:].split(":")
    base = os.path.join(logs, pkg, name)
    paths = glob.glob(os.path.join(base, "shard_*_of_*", "test.xml")) or [os.path.join(base, "test.xml")]
    totals = [0, 0, 0]
    for path in paths:
        if not os.path.exists(path):
            return 0, 1, 0
        for i, n in enumerate(count_file(path)):
            totals[i] += n
    return tuple(totals)


def count_file(path):
    root = ET.parse(path).getroot()
    cases = root.findall(".//testcase")
    if not cases:  # a non-gtest target: Bazel writes one suite with the exit status
        failed = int(root.get("failures", 0)) + int(root.get("errors", 0))
        suite = root.find(".//testsuite")
        if suite is not None:
            failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        return (0, 1, 0) if failed else (1, 0, 0)
    p = f = s = 0
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            f += 1
        elif case.find("skipped") is not None or case.get("result") == "skipped":
            s += 1
        else:
            p += 1
    return p, f, s


def main():
    logs = sys.argv[1]
    totals = [0, 0, 0]
    for line in sys.stdin:
        label = line.strip()
        if label.startswith("//"):
            for i, n in enumerate(count(logs, label)):
                totals[i] += n
    print(*totals)


if __name__ == "__main__":
    main()
