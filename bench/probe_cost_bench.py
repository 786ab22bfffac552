"""What the numerical probes cost (issue "health checks that see the machine", section 1): the same
job with probes (the known-answer GEMM at the stage's shapes and the replay of an F, in each
rank's longest predicted bubble) and without (health.probesOff), alternating on one cluster of
real processes (a coordinator and CPU worker daemons on loopback), ROUNDS rounds each. Prints the
median step time of each side, their ratio (the goal: <= 1.02) and how many health events were
raised (none expected).

Jobs: "demo" (pp 4 zbh1, 8 micro-batches of 4, the demo's 8-layer h 64 model), "pp2" (1f1b, 4
micro-batches) and "pp8" (1f1b, 16 micro-batches of 2): fault_matrix_bench.py's shapes.

Run: bazel run -c opt //bench:probe_cost_bench [-- --rounds 5 --steps 100]
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_matrix_bench import JOBS, Cluster, spec, step_time  # noqa: E402

GOAL = 1.02


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="jobs per side and job shape")
    ap.add_argument("--steps", type=int, default=80, help="steps of each job (the first 5 are not timed)")
    ap.add_argument("--jobs", default="demo,pp2,pp8", help="comma-separated: demo, pp2, pp8")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="probe-cost.")
    print(f"probe cost: {args.rounds} round(s) of {args.steps} steps per side, {os.cpu_count()} cores; logs in {work}")
    missed = 0
    for kind in args.jobs.split(","):
        cluster = Cluster(work, JOBS[kind]["pp"])
        try:
            on, off, events = [], [], 0
            for r in range(args.rounds):
                sides = (False, True) if r % 2 == 0 else (True, False)  # alternate which goes first
                for probes_off in sides:
                    s = spec(kind, args.steps)
                    if probes_off:
                        s["health"] = {"probesOff": True}
                    st = cluster.run(s)
                    (off if probes_off else on).append(step_time(st, 5))
                    events += len(st["health"])
            ratio = statistics.median(on) / statistics.median(off)
            met = ratio <= GOAL
            missed += not met
            print(f"{kind:5s}: median step {statistics.median(on) * 1e3:.3f} ms with probes, "
                  f"{statistics.median(off) * 1e3:.3f} ms without: ratio {ratio:.3f} (goal <= {GOAL}) "
                  f"[{'goal met' if met else 'goal MISSED'}]; rounds with {[round(t * 1e3, 3) for t in on]}, "
                  f"without {[round(t * 1e3, 3) for t in off]}; {events} health event(s)")
        finally:
            cluster.close()
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
