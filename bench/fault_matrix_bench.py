"""The health checks as rates (issue "health checks that see the machine", section 3): how often
each check raises a false alarm on clean runs, and how often and how fast it finds each fault, at
the DEFAULT thresholds, over real processes (a coordinator and CPU worker daemons on loopback,
real gRPC, the default 5 s lease), in one run.

Jobs: "demo" (the demo's shape: pp 4, zbh1, 8 micro-batches of 4, an 8-layer h 64 model), "pp2"
(1f1b, 4 micro-batches) and "pp8" (1f1b, 16 micro-batches), every rank a worker process on this
machine's cores. Rows:
  clean       RUNS jobs of CLEAN_STEPS steps of each: every health event is a false alarm; the
              rate per 1000 steps, and the median step time (the baseline of the fault rows);
  slow        rank 1's compute FACTOR x as long from step 8 (1.3x, 1.5x, 2x, 5x on demo; 2x on pp2 and
              pp8): found when a STRAGGLER names rank 1 or a BUBBLE names it as the peer waited
              on; steps to detection = the event's step - 8 + 1 (goals: 2x within 5, 1.3x within 20);
  hang        rank 1 stops at step 6: HANG naming rank 1 and step 6;
  corrupt     rank 2's GEMM flips a bit from step 5: SDC naming rank 2 (steps to detection from 5);
  oom         rank 3 holds 64 MiB more from step 6: MEMORY naming rank 3;
  flip        a transient: one bit of rank 1's F of micro-batch k at step 5, once, for each k
              (one run each): SDC naming rank 1 at step 5, seen only for the F its probe replays;
  slowlink    every message rank 1 sends from step 8 reaches its link 80 ms late: BUBBLE events
              naming rank 1 as the peer waited on or as their wait chain's root (the link from it);
each RUNS times. Any other event in a fault run is a false alarm. Each fault row prints its step
time against the clean baseline of the same job (the fault's cost, a ratio in one run).

Run: bazel run -c opt //bench:fault_matrix_bench [-- --runs 10]   (RUNS 3 by default: ~5 min)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

SLOW_FROM = 8
MODEL = {"layers": 8, "hidden": 64, "heads": 4, "vocab": 128, "seqLen": 32, "seed": "7"}
JOBS = {
    "demo": {"schedule": "zbh1", "pp": 4, "microbatches": 8, "microBatchSize": 4},
    "pp2": {"schedule": "1f1b", "pp": 2, "microbatches": 4, "microBatchSize": 4},
    "pp8": {"schedule": "1f1b", "pp": 8, "microbatches": 16, "microBatchSize": 2},
}


def spec(kind, steps):
    s = {"name": "fault-matrix-" + kind, "steps": steps, "learningRate": 0.003, "model": dict(MODEL)}
    s.update(JOBS[kind])
    return s


class Cluster:
    """A coordinator and `n` workers (each given `inject`), stopped on close."""

    def __init__(self, work, n, inject=""):
        self.work, self.procs = work, []
        log = f"{work}/coordinator.log"
        self.procs.append(subprocess.Popen(["coordinator/coordinator", "--listen", "127.0.0.1:0"],
                                           stdout=open(log, "w"), stderr=subprocess.STDOUT))
        self.addr = wait_for(lambda: (re.findall(r"coordinator listening on (\S+)", open(log).read()) or [None])[0],
                             10, "the coordinator")
        for i in range(n):
            argv = ["worker/daemon/worker", "--coordinator", self.addr] + (["--inject", inject] if inject else [])
            self.procs.append(subprocess.Popen(argv, stdout=open(f"{work}/worker-{i}.log", "w"),
                                               stderr=subprocess.STDOUT))
        wait_for(lambda: len(self.pipectl("workers").get("workers", [])) >= n, 30, "the workers")

    def pipectl(self, *args, check=True):
        out = subprocess.run(["cli/pipectl", "--coordinator", self.addr, *args, "--format", "json"],
                             capture_output=True, text=True)
        if check and out.returncode != 0:
            sys.exit("fault_matrix_bench: pipectl %s: %s" % (" ".join(args), out.stderr.strip()))
        return json.loads(out.stdout) if out.stdout.strip() else {}

    def run(self, job_spec, stop_on=None):
        """Submits, waits for the end (or for a `stop_on` event kind, then cancels); the job's status."""
        path = f"{self.work}/job.json"
        json.dump(job_spec, open(path, "w"))
        job = self.pipectl("submit", path)["jobId"]
        end = time.monotonic() + 600
        while time.monotonic() < end:
            st = self.pipectl("status", job)
            if st["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
            if stop_on and any(e["kind"] == stop_on for e in self.events(job)):
                subprocess.run(["cli/pipectl", "--coordinator", self.addr, "cancel", job], capture_output=True)
            time.sleep(0.1)
        else:
            sys.exit(f"fault_matrix_bench: {job} did not end")
        if st["state"] != "SUCCEEDED" and not stop_on:
            sys.exit(f"fault_matrix_bench: {job} {st['state']}: {st.get('failureCause')}")
        st["health"] = self.events(job)
        return st

    def events(self, job):
        return self.pipectl("events", job, "--kind", "health").get("events", [])

    def close(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


def wait_for(predicate, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    sys.exit(f"fault_matrix_bench: timed out waiting for {what}")


def step_time(status, first=0):
    times = [s.get("stepTimeS", 0) for s in status.get("steps", []) if s.get("step", 0) >= first]
    return statistics.median(times) if times else 0.0


def waited_on(event, rank):
    """A BUBBLE that waited for `rank`, or whose wait chain's root is `rank` or its link."""
    m = event["message"]
    return event["kind"] == "BUBBLE" and (
        bool(re.search(r"waited [0-9.]+ s for rank %d \(dp 0\)($|;)" % rank, m))
        or m.endswith("root of the wait chain: rank %d (dp 0)" % rank)
        or "root of the wait chain: the link from rank %d (dp 0)" % rank in m)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="jobs per row (the issue's goal: 10)")
    ap.add_argument("--clean-steps", type=int, default=60, help="steps of each clean job")
    ap.add_argument("--verbose", action="store_true", help="print the event that found each fault")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="fault-matrix.")
    print(f"fault matrix: {args.runs} run(s) per row, default thresholds, {os.cpu_count()} cores; logs in {work}")
    baseline = {}
    total_false = 0
    for kind in JOBS:
        cluster = Cluster(work, JOBS[kind]["pp"])
        try:
            alarms, steps, times = 0, 0, []
            for _ in range(args.runs):
                st = cluster.run(spec(kind, args.clean_steps))
                alarms += len(st["health"])
                for e in st["health"]:
                    print(f"  false alarm ({kind}, clean): {e['message']}")
                steps += len(st.get("steps", []))
                times.append(step_time(st, 5))
            baseline[kind] = statistics.median(times)
            total_false += alarms
            print(f"clean {kind:5s}: {args.runs} jobs x {args.clean_steps} steps: {alarms} false alarm(s), "
                  f"{1000.0 * alarms / max(steps, 1):.2f} per 1000 steps; median step {baseline[kind] * 1e3:.1f} ms")
        finally:
            cluster.close()

    def fault_row(label, kind, inject, steps, kinds, rank, start, stop_on=None, goal=None):
        nonlocal total_false
        cluster = Cluster(work, JOBS[kind]["pp"], inject)
        try:
            found, latencies, alarms, times = 0, [], 0, []
            for _ in range(args.runs):
                st = cluster.run(spec(kind, steps), stop_on)
                hits = [e for e in st["health"]
                        if (e["kind"] in kinds and e.get("rank", 0) == rank) or ("BUBBLE" in kinds and waited_on(e, rank))]
                others = [e for e in st["health"] if e not in hits]
                alarms += len(others)
                for e in others:
                    print(f"  false alarm ({label}): {e['message']}")
                if hits:
                    found += 1
                    if args.verbose:
                        print(f"  found ({label}): {min(hits, key=lambda e: e.get('step', 0))['message']}")
                    latencies.append(min(e.get("step", 0) for e in hits) - start + 1)
                times.append(step_time(st, start))
            total_false += alarms
            lat = (f"steps to detection median {statistics.median(latencies):g}, max {max(latencies)}"
                   if latencies else "never detected")
            times = [t for t in times if t > 0]  # a hung job has no step after its fault
            ratio = (f"step time x{statistics.median(times) / baseline[kind]:.2f} the clean run's"
                     if baseline[kind] > 0 and times else "no step after the fault")
            goal_text = f" (goal: within {goal})" if goal else ""
            met = "" if not goal or not latencies else ("  [goal met]" if found == args.runs and max(latencies) <= goal
                                                          else "  [goal MISSED]")
            print(f"{label:24s} on {kind:5s}: detected {found}/{args.runs}, {lat}{goal_text}; "
                  f"{alarms} false alarm(s); {ratio}{met}")
        finally:
            cluster.close()

    for factor, goal in (("1.3", 20), ("1.5", 5), ("2", 5), ("5", 5)):
        fault_row(f"slow {factor}x rank 1 from {SLOW_FROM}", "demo", f"slow:1:{factor}:{SLOW_FROM}",
                  SLOW_FROM + goal + 3, ("STRAGGLER", "BUBBLE"), 1, SLOW_FROM, goal=goal)
    for kind in ("pp2", "pp8"):
        fault_row(f"slow 2x rank 1 from {SLOW_FROM}", kind, f"slow:1:2:{SLOW_FROM}", SLOW_FROM + 8,
                  ("STRAGGLER", "BUBBLE"), 1, SLOW_FROM, goal=5)
    fault_row("slowlink 80 ms rank 1 from 8", "demo", f"slowlink:1:80:{SLOW_FROM}", SLOW_FROM + 8, ("BUBBLE",), 1,
              SLOW_FROM, goal=5)
    fault_row("hang rank 1 at 6", "demo", "hang:1:6", 40, ("HANG",), 1, 6, stop_on="HANG")
    fault_row("corrupt rank 2 from 5", "demo", "corrupt:2:5", 12, ("SDC",), 2, 5)
    fault_row("oom rank 3 64 MiB at 6", "demo", "oom:3:67108864:6", 12, ("MEMORY",), 3, 6)

    # A transient: one flipped bit in rank 1's F of each micro-batch in turn at step 5, one run
    # each. Only the replay probe can see it, and only in the F the plan has it replay.
    found, alarms = [], 0
    for mb in range(JOBS["demo"]["microbatches"]):
        cluster = Cluster(work, JOBS["demo"]["pp"], f"flip:1:5:{mb}")
        try:
            st = cluster.run(spec("demo", 10))
            hits = [e for e in st["health"] if e["kind"] == "SDC" and e.get("rank", 0) == 1 and e.get("step") == 5]
            alarms += len(st["health"]) - len(hits)
            if hits:
                found.append(mb)
        finally:
            cluster.close()
    total_false += alarms
    print(f"{'flip rank 1 at 5, each mb':24s} on demo : detected {len(found)}/{JOBS['demo']['microbatches']} "
          f"(micro-batches {found}: the F rank 1's probe replays), 0 steps late; {alarms} false alarm(s)")
    print(f"false alarms in all rows: {total_false}")


if __name__ == "__main__":
    main()
