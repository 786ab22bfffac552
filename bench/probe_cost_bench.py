"""What the numerical probes cost (issue "health checks that see the machine", section 1): the same
job with probes (the known-answer GEMM at the stage's shapes and the replay of an F, in each
rank's longest predicted bubble), with the GEMM only (health.replayOff) and without
(health.probesOff), in rotating order on one cluster of
real processes (a coordinator and CPU worker daemons on loopback), ROUNDS rounds each. Prints the
median step time of each side, the ratios to the run without (the goal: <= 1.02) and how many
health events were raised (none expected). Where ranks share cores (more ranks than cores) a
bubble is not idle hardware, and the probes' work shows in the step time.

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
            times = {"off": [], "gemm": [], "full": []}  # no probes; the GEMM only (replayOff); both
            events = 0
            for r in range(args.rounds):
                order = ["off", "gemm", "full"]
                order = order[r % 3:] + order[:r % 3]  # rotate which goes first
                for side in order:
                    s = spec(kind, args.steps)
                    if side == "off":
                        s["health"] = {"probesOff": True}
                    elif side == "gemm":
                        s["health"] = {"replayOff": True}
                    st = cluster.run(s)
                    times[side].append(step_time(st, 5))
                    events += len(st["health"])
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio, gemm_ratio = med["full"] / med["off"], med["gemm"] / med["off"]
            met = ratio <= GOAL
            missed += not met
            print(f"{kind:5s}: median step {med['full'] * 1e3:.3f} ms with probes, {med['gemm'] * 1e3:.3f} ms with "
                  f"the GEMM only, {med['off'] * 1e3:.3f} ms without: ratio {ratio:.3f} (GEMM only {gemm_ratio:.3f}; "
                  f"goal <= {GOAL}) [{'goal met' if met else 'goal MISSED'}]; {events} health event(s); rounds "
                  + ", ".join(f"{k} {[round(t * 1e3, 2) for t in v]}" for k, v in times.items()))
        finally:
            cluster.close()
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
