"""What a lost rank costs: in-place recovery on a spare against the checkpoint restart (the
baseline), on the same job, the same fleet, in one run (docs/operations.md, "A lost rank").

A real coordinator and CPU worker daemons on loopback. The same pp 2 x dp 2 job runs three times,
each time the worker of global rank 3 SIGKILLed after step KILL_AFTER: with spec.recovery "auto"
and no free worker (shrink: the job goes on with one replica fewer, from memory), with "auto" and a
free worker (spare: it takes the lost rank over with its replica's state), and with "restart"
(the baseline: every rank reloads the last checkpoint). Printed for each: the time from the kill
to the next completed step (the coordinator's step record, as the WatchJob stream delivers it),
the steps computed again, and the bytes moved (state streamed from the replica, checkpoint files
read by every rank; a shrink moves none), with their rates; then the same projected to a stage of
7e9 parameters at 12 bytes each (fp32 weights and AdamW moments, what these paths move for this
backend) from the measured rates.

Run: bazel run -c opt //bench:recovery_bench
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc

from proto import job_pb2, job_pb2_grpc

KILL_AFTER = 12
STEPS = 60
LOST = 3  # global rank: the last stage of replica 1
PROJECTED_PARAMS = 7e9
BYTES_PER_PARAM = 12


def start(argv, log):
    return subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT)


def wait_for(predicate, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    sys.exit(f"recovery_bench: timed out waiting for {what}")


def spec(recovery):
    return {
        "name": "recovery-bench-" + recovery, "schedule": "1f1b", "pp": 2, "dp": 2, "microbatches": 4,
        "microBatchSize": 2, "steps": STEPS, "learningRate": 0.001, "checkpointEvery": 5, "maxRestarts": 1,
        "recovery": recovery,
        "model": {"layers": 8, "hidden": 256, "heads": 8, "vocab": 1024, "seqLen": 64, "seed": "5"},
    }


def main():
    work = tempfile.mkdtemp(prefix="recovery-bench.")
    coordinator = start(["coordinator/coordinator", "--listen", "127.0.0.1:0", "--lease-ms", "2000"],
                        f"{work}/coordinator.log")
    procs = [coordinator]
    try:
        addr = wait_for(lambda: (re.findall(r"coordinator listening on (\S+)", open(f"{work}/coordinator.log").read())
                                 or [None])[0], 10, "the coordinator")
        worker_logs = []
        pid_of = {}
        channel = grpc.insecure_channel(addr)
        jobs = job_pb2_grpc.JobServiceStub(channel)

        def add_workers(n):
            for _ in range(n):
                log = f"{work}/worker-{len(worker_logs)}.log"
                proc = start(["worker/daemon/worker", "--coordinator", addr, "--checkpoint-dir", f"{work}/ck"], log)
                procs.append(proc)
                worker_logs.append(log)
                wid = wait_for(lambda: (re.findall(r"registered as ([^,]+),", open(log).read()) or [None])[0], 20, "ids")
                pid_of[wid] = (proc, log)

        def free_workers():
            return sum(1 for w in jobs.ListWorkers(job_pb2.ListWorkersRequest()).workers if not w.job_id)

        rows = {}
        # shrink: exactly the job's 4 workers; spare: one more free; restart: 4 to start again on.
        for path, recovery, fleet in (("shrink", "auto", 4), ("spare", "auto", 5), ("restart", "restart", 5)):
            add_workers(fleet - free_workers())
            wait_for(lambda: free_workers() >= fleet, 20, f"{fleet} free workers")
            from google.protobuf import json_format
            request = job_pb2.SubmitJobRequest(spec=json_format.ParseDict(spec(recovery), job_pb2.JobSpec()))
            job_id = jobs.SubmitJob(request).job_id
            updates = []  # (arrival, update)
            done = threading.Event()

            def follow():
                for u in jobs.WatchJob(job_pb2.WatchJobRequest(job_id=job_id)):
                    updates.append((time.monotonic(), u))
                    if u.state in (job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.CANCELLED) and u.event:
                        break
                done.set()

            threading.Thread(target=follow, daemon=True).start()
            wait_for(lambda: any(not u.event and u.step >= KILL_AFTER for _, u in updates), 300, "the kill step")
            job = jobs.GetJob(job_pb2.GetJobRequest(job_id=job_id))
            victim = job.worker_ids[LOST]
            proc, _ = pid_of[victim]
            before = max(u.step for _, u in updates if not u.event and not u.HasField("health_event"))
            killed = time.monotonic()
            proc.send_signal(signal.SIGKILL)
            done.wait(600)
            final = jobs.GetJob(job_pb2.GetJobRequest(job_id=job_id))
            if final.state != job_pb2.SUCCEEDED:
                sys.exit(f"recovery_bench: {recovery}: the job ended {job_pb2.JobState.Name(final.state)}: "
                         f"{final.failure_cause}")
            after = [(t, u) for t, u in updates if t >= killed]
            events = [u.event for _, u in after if u.event]
            if recovery == "auto":
                resume = int(next(re.search(r"resumes at step (\d+)", e).group(1) for e in events if "resumes at step" in e))
                assert (path == "shrink") == any("one replica fewer" in e for e in events), events
            else:
                resume = int(next(re.search(r"from step (\d+)", e).group(1) for e in events if e.startswith("restarting")))
            first = next(t for t, u in after if not u.event and u.step == resume and u.step_time_s > 0)
            bytes_moved, seconds = 0, 0.0
            for log in worker_logs:
                text = open(log).read()
                if path == "spare":
                    for n, s in re.findall(r"took over in place at step \d+: (\d+) bytes of state from global rank \d+ "
                                           r"in ([0-9.]+) s", text):
                        bytes_moved, seconds = bytes_moved + int(n), max(seconds, float(s))
                elif path == "restart":
                    for step, n, s in re.findall(r"loaded the checkpoint of step (\d+): (\d+) bytes of state in ([0-9.]+) s",
                                                 text):
                        if int(step) == resume - 1:
                            bytes_moved, seconds = bytes_moved + int(n), max(seconds, float(s))
            step_times = [u.step_time_s for _, u in updates if not u.event and u.step_time_s > 0]
            after_times = [u.step_time_s for t, u in updates if t > first and not u.event and u.step_time_s > 0]
            rows[path] = {
                "kill_to_next_step_s": first - killed,
                "recomputed": before + 1 - resume + 1,  # the steps measured again, and the one in flight
                "bytes": bytes_moved,
                "transfer_s": seconds,
                "ranks_reading": 4 if path == "restart" else 1,
                "step_s": sorted(step_times)[len(step_times) // 2],
                "step_after_s": sorted(after_times)[len(after_times) // 2] if after_times else 0.0,
                "recoveries": final.recoveries,
                "restarts": final.restarts,
            }

        spare, restart, shrink = rows["spare"], rows["restart"], rows["shrink"]
        print(f"recovery_bench: pp 2 x dp 2, 1f1b, h 256, 8 layers ({spare['bytes'] / BYTES_PER_PARAM / 1e6:.2f} M "
              f"parameters on the lost rank), global rank {LOST} SIGKILLed after step {KILL_AFTER}; "
              f"median step {spare['step_s']:.3f} s")
        print(f"{'path':<28}{'kill -> next step':>18}{'steps again':>13}{'bytes moved':>14}{'rate':>13}"
              f"{'7B stage: move':>16}{'+ steps again':>15}")
        for name, r in (("spare (in place)", spare), ("shrink (dp 2 -> 1)", shrink), ("checkpoint restart (base)", restart)):
            per_rank = r["bytes"] / max(1, r["ranks_reading"])
            rate = per_rank / r["transfer_s"] if r["transfer_s"] > 0 else 0.0
            projected = f"{PROJECTED_PARAMS * BYTES_PER_PARAM / rate:>14.1f} s" if rate > 0 else f"{'0 s':>16}"
            rate_text = f"{rate / 1e6:>9.0f} MB/s" if rate > 0 else f"{'-':>13}"
            print(f"{name:<28}{r['kill_to_next_step_s']:>16.2f} s{r['recomputed']:>13d}{r['bytes'] / 1e6:>11.1f} MB"
                  f"{rate_text}{projected}{r['recomputed']:>13d} x")
        print(f"ratio, kill -> next step, checkpoint restart (base) / path: spare "
              f"{restart['kill_to_next_step_s'] / spare['kill_to_next_step_s']:.2f}x, shrink "
              f"{restart['kill_to_next_step_s'] / shrink['kill_to_next_step_s']:.2f}x (1 s of each is the suspect "
              f"grace); steps computed again: spare {spare['recomputed']}, shrink {shrink['recomputed']}, restart "
              f"{restart['recomputed']} (checkpoints every 5 steps here); restarts counted "
              f"{spare['restarts']} / {shrink['restarts']} / {restart['restarts']}")
        print("rates: the spare's is the loopback stream from its replica (one rank's state, from the resume "
              "command to the last tensor); the restart's is one rank's checkpoint read (page cache, the "
              "best case for a re-read); a shrink moves no state but runs on with one replica fewer "
              f"(its median step after the loss: {shrink['step_after_s']:.3f} s vs {shrink['step_s']:.3f} s)")
        print(json.dumps(rows))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
