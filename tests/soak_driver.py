"""Soak: jobs back to back on real processes, with workers and the coordinator killed mid-way.

4 workers, JOBS jobs of random shapes (every schedule family, csv included; dp 1-2, pp 1-4,
uneven layers), submitted in bursts. After a quarter of them a worker is SIGKILLed and a
replacement started; at half the coordinator is SIGKILLed and restarted on its state file; at
three quarters two workers are SIGKILLed and replaced. Then every job must reach the state it
should:
  - SUCCEEDED, or
  - FAILED with no restarts left and a cause naming a killed worker, and every restart or requeue
    event names one too (a coordinator restart fails and restarts nothing: every job it
    interrupted, and no worker kill touched, must SUCCEED with no restart);
no "session mismatch" anywhere (causes, events, worker logs), no job lost across the coordinator's
restart, and at the end 4 workers registered, every one free.

Run by tests/soak_test.sh (paths from tests/lib.sh). Prints its numbers; exits 1 on the first
broken rule, naming the job and what it saw.
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

COORDINATOR, WORKER, PIPECTL, WORK = (os.environ[k] for k in ("COORDINATOR", "WORKER", "PIPECTL", "WORK"))
JOBS = int(os.environ.get("SOAK_JOBS", "100"))
SEED = int(os.environ.get("SOAK_SEED", "13"))
LEASE_MS = 2000  # a loaded 2-core machine may delay a heartbeat (every lease/3), not by 2 s

from pipecoord import Client, PipecoordError  # noqa: E402  (PYTHONPATH set by soak_test.sh)

FAMILIES = ["fthenb", "1f1b", "eager-1f1b", "interleaved", "looped-bfs", "zbh1", "zbh2", "zb-auto",
            "zbv", "v-half", "v-min", "dualpipev", "v-auto", "csv"]
TWO_CHUNKS = {"interleaved", "looped-bfs", "zbv", "v-half", "v-min", "dualpipev", "v-auto"}
SHAPES = [(1, 1), (2, 1), (3, 1), (4, 1), (1, 2), (2, 2)]  # (pp, dp): at most 4 workers


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def make_spec(rng, index):
    family = FAMILIES[index % len(FAMILIES)]  # every family, evenly
    pp, dp = rng.choice(SHAPES)
    vpp = 2 if family in TWO_CHUNKS else 1
    spec = {"name": "soak-%d-%s" % (index, family), "schedule": family, "pp": pp, "dp": dp,
            "microbatches": 2 * pp + rng.randint(0, 3), "microBatchSize": rng.randint(1, 2),
            "steps": rng.randint(3, 30), "learningRate": 0.01,
            "model": {"hidden": 16, "heads": 2, "vocab": 32, "seqLen": 8, "seed": str(index + 1)}}
    if rng.random() < 0.5:
        per_rank = [rng.randint(vpp, vpp + 2) for _ in range(pp)]  # uneven, user-chosen
        spec["stageLayers"] = per_rank
        spec["model"]["layers"] = sum(per_rank)
    else:
        spec["model"]["layers"] = pp * vpp + rng.randint(0, 3)  # uneven when it does not divide
    if rng.random() < 0.5:
        spec["checkpointEvery"] = 1
        spec["maxRestarts"] = 2
    if family == "csv":
        csv = subprocess.run([PIPECTL, "schedule", "--schedule", "1f1b", "--pp", str(pp), "--microbatches",
                              str(spec["microbatches"]), "--format", "csv"], capture_output=True, text=True, check=True)
        spec["csvSchedule"] = csv.stdout
        spec["stageLayers"] = spec.get("stageLayers", [])
    return spec


class Cluster:
    def __init__(self):
        self.state = os.path.join(WORK, "soak-state.db")
        self.ckpt = os.path.join(WORK, "soak-checkpoints")
        self.coordinator = None
        self.address = None
        self.workers = []  # [Popen, log path]
        self.killed_ids = set()
        self.restarts_of_coordinator = 0
        self.n_logs = 0

    def start_coordinator(self, port=0):
        log = os.path.join(WORK, "soak-coordinator-%d.log" % self.restarts_of_coordinator)
        out = open(log, "w")
        self.coordinator = subprocess.Popen([COORDINATOR, "--listen", "127.0.0.1:%d" % port, "--state", self.state,
                                             "--lease-ms", str(LEASE_MS)], stdout=out, stderr=subprocess.STDOUT)
        for _ in range(200):
            text = open(log).read()
            m = re.search(r"coordinator listening on (\S+)", text)
            if m:
                self.address = m.group(1)
                return
            if self.coordinator.poll() is not None:
                fail("the coordinator exited: " + text)
            time.sleep(0.05)
        fail("the coordinator did not start")

    def start_worker(self):
        self.n_logs += 1
        log = os.path.join(WORK, "soak-worker-%d.log" % self.n_logs)
        p = subprocess.Popen([WORKER, "--coordinator", self.address, "--checkpoint-dir", self.ckpt],
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.workers.append([p, log])

    def worker_ids(self, log):
        return set(re.findall(r"registered as (worker-\d+)", open(log).read()))

    def kill_worker(self, index):
        p, log = self.workers[index]
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.killed_ids |= self.worker_ids(log)
        del self.workers[index]

    def kill_coordinator(self):
        self.coordinator.send_signal(signal.SIGKILL)
        self.coordinator.wait()
        self.restarts_of_coordinator += 1

    def stop(self):
        for p, _ in self.workers:
            p.send_signal(signal.SIGTERM)
        for p, _ in self.workers:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.coordinator is not None:
            self.coordinator.send_signal(signal.SIGTERM)
            self.coordinator.wait()


def list_workers(client):
    return client.workers()


def wait_for_workers(client, n, deadline_s=30):
    end = time.time() + deadline_s
    while time.time() < end:
        if len(list_workers(client)) >= n:
            return
        time.sleep(0.05)
    fail("fewer than %d workers registered after %d s" % (n, deadline_s))


def main():
    rng = random.Random(SEED)
    t0 = time.time()
    cluster = Cluster()
    cluster.start_coordinator()
    for _ in range(4):
        cluster.start_worker()
    client = Client(cluster.address)
    wait_for_workers(client, 4)
    submitted = []  # job ids, in order
    specs = {}
    kills = {JOBS // 4: "worker", JOBS // 2: "coordinator", 3 * JOBS // 4: "two workers"}
    hits = {}  # what each kill took down: jobs running at that moment
    index = 0
    while index < JOBS:
        burst = min(rng.randint(4, 12), JOBS - index)
        for _ in range(burst):
            spec = make_spec(rng, index)
            try:
                job_id = client.submit(spec)
            except PipecoordError as e:
                fail("submit of %s refused: %s" % (spec["name"], e))
            submitted.append(job_id)
            specs[job_id] = spec
            index += 1
            kill = next((k for at, k in kills.items() if index == at), None)
            if kill is None:
                continue
            # Kill when a job is mid-run (a measured step at least), so the kill costs something.
            end = time.time() + 10
            while time.time() < end and not any(j.state == "RUNNING" and j.steps_done >= 1 for j in client.jobs()):
                time.sleep(0.01)
            running = sorted(j.id for j in client.jobs() if j.state == "RUNNING")
            if kill == "coordinator":
                cluster.kill_coordinator()
                hits[kill] = running
                time.sleep(0.5)
                port = int(cluster.address.rsplit(":", 1)[1])
                cluster.start_coordinator(port)
                client = Client(cluster.address)
                wait_for_workers(client, 4)
            else:
                victims = 1 if kill == "worker" else 2
                for _ in range(victims):
                    cluster.kill_worker(rng.randrange(len(cluster.workers)))
                hits[kill] = running
                time.sleep(0.3)
                for _ in range(victims):
                    cluster.start_worker()
        time.sleep(rng.uniform(0.0, 1.5))

    # Every job reaches a terminal state.
    deadline = time.time() + 600
    while True:
        jobs = {j.id: j for j in client.jobs()}
        live = [i for i in submitted if i in jobs and jobs[i].state not in ("SUCCEEDED", "FAILED", "CANCELLED")]
        if not live:
            break
        if time.time() > deadline:
            fail("jobs still live after 600 s: " + ", ".join("%s %s" % (i, jobs[i].state) for i in live[:10]))
        time.sleep(0.2)
    missing = [i for i in submitted if i not in jobs]
    if missing:
        fail("acknowledged jobs lost across the coordinator's restart: %s" % missing)

    # The state each job should be in, and why.
    # A coordinator restart interrupts no job any more (its workers train on and are re-adopted):
    # only a worker kill may fail or restart one. The one exception sends an attempt back to the
    # queue, restarting nothing: a worker whose assignment the killed coordinator never delivered.
    kill_words = [re.escape(w) for w in sorted(cluster.killed_ids)]
    by_kill = re.compile("|".join(kill_words))
    undelivered = re.compile(r"^back in the queue \(the coordinator restarted before worker worker-\d+ got its assignment")
    counts = {"SUCCEEDED": 0, "FAILED": 0, "restarts": 0, "requeues": 0, "in place": 0}
    for job_id in submitted:
        job = client.get(job_id)
        spec = specs[job_id]
        events = [e.message for e in job.events]
        for e in events:
            if "session mismatch" in e:
                fail("%s: event %r" % (job_id, e))
            if e.startswith("restarting (") or e.startswith("back in the queue ("):
                if undelivered.search(e):
                    counts["requeues"] += 1
                    continue
                if not by_kill.search(e):
                    fail("%s (%s): a restart or requeue not caused by a kill: %r" % (job_id, spec["name"], e))
                counts["restarts" if e.startswith("restarting") else "requeues"] += 1
            if e.startswith("lost ") and "taking it over in place" in e and not by_kill.search(e):
                fail("%s (%s): a rank taken over in place not lost to a kill: %r" % (job_id, spec["name"], e))
        # Each recovery in place ended with its event (a lost rank of a dp 2 job, a spare free).
        recovered = sum(1 for e in events if e.startswith("recovered ") and "no checkpoint read" in e)
        if recovered != job.recoveries:
            fail("%s: %d recoveries counted, %d recovered events: %s" % (job_id, job.recoveries, recovered, events))
        counts["in place"] += job.recoveries
        if job.state == "SUCCEEDED":
            if job.steps_done != spec["steps"] or [r.step for r in job.steps] != list(range(spec["steps"])):
                fail("%s (%s, pp %d dp %d): SUCCEEDED with %d of %d steps, step records %s; events: %s"
                     % (job_id, spec["name"], spec["pp"], spec["dp"], job.steps_done, spec["steps"],
                        [r.step for r in job.steps], events))
        elif job.state == "FAILED":
            if "session mismatch" in job.failure_cause or not by_kill.search(job.failure_cause):
                fail("%s (%s, pp %d dp %d): FAILED not by a kill: %s" % (job_id, spec["name"], spec["pp"], spec["dp"],
                                                                         job.failure_cause))
            if job.restarts != spec.get("maxRestarts", 0):
                fail("%s: FAILED with %d of %d restarts used: %s" % (job_id, job.restarts, spec.get("maxRestarts", 0),
                                                                     job.failure_cause))
        else:
            fail("%s: ended %s" % (job_id, job.state))
        counts[job.state] += 1

    # Every job the coordinator's kill interrupted, and no worker kill touched, SUCCEEDED with no
    # restart: it rode the restart out.
    by_workers = set(hits.get("worker", [])) | set(hits.get("two workers", []))
    rode = [j for j in hits.get("coordinator", []) if j not in by_workers]
    for job_id in rode:
        job = client.get(job_id)
        if job.state != "SUCCEEDED" or job.restarts != 0:
            fail("%s was running when the coordinator was killed: ended %s with %d restart(s): %s; events: %s"
                 % (job_id, job.state, job.restarts, job.failure_cause, [e.message for e in job.events]))
    if counts["SUCCEEDED"] + counts["FAILED"] != len(submitted):
        fail("%d SUCCEEDED + %d FAILED != %d jobs" % (counts["SUCCEEDED"], counts["FAILED"], len(submitted)))
    if hits.get("coordinator") and not rode:
        fail("the coordinator's kill interrupted no job the workers' kills left alone: nothing was shown")

    # Every worker free, none lost or doubled.
    end = time.time() + 15
    while True:
        workers = list_workers(client)
        busy = ["%s holds %s%s" % (w.worker_id, w.job_id, " (closing)" if w.closing else "") for w in workers if w.job_id]
        if len(workers) == 4 and not busy:
            break
        if time.time() > end:
            fail("at the end %d workers, busy: %s" % (len(workers), busy))
        time.sleep(0.1)
    for _, log in cluster.workers:
        if "session mismatch" in open(log).read():
            fail("%s mentions a session mismatch" % log)
    for name in os.listdir(WORK):
        if name.startswith("soak-worker-") and "session mismatch" in open(os.path.join(WORK, name)).read():
            fail("%s mentions a session mismatch" % name)
    cluster.stop()
    hit_jobs = sorted({j for running in hits.values() for j in running})
    print("soak: %d jobs (seed %d) in %.0f s: %d SUCCEEDED, %d FAILED (each by a kill, no restarts left); "
          "%d restarts and %d requeues, each caused by a kill; %d lost rank(s) recovered in place; "
          "jobs running at the kills: %s; "
          "0 session mismatches; 4 workers free at the end; %d job(s) rode out the coordinator's restart, "
          "all SUCCEEDED with no restart"
          % (len(submitted), SEED, time.time() - t0, counts["SUCCEEDED"], counts["FAILED"], counts["restarts"],
             counts["requeues"], counts["in place"], ", ".join("%s %d" % (k, len(v)) for k, v in hits.items()),
             len(rode)))
    print("soak: jobs running at the kills: %s" % ", ".join(hit_jobs))


if __name__ == "__main__":
    main()
