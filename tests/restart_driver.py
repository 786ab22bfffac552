"""Kills the coordinator (SIGKILL) at random points while a client submits jobs and a worker
sends telemetry, restarts it on the same --state file, and checks at the end that every job id,
every telemetry step and action the coordinator acknowledged, and every event it showed a
client, is there.

    restart_driver.py COORDINATOR_BINARY WORKDIR SECONDS
"""
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import json

import grpc

from proto import job_pb2, job_pb2_grpc, telemetry_pb2, worker_pb2, worker_pb2_grpc


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Coordinator:
    def __init__(self, binary, workdir, port):
        self.args = [binary, "--listen", f"127.0.0.1:{port}", "--state", os.path.join(workdir, "state.db"),
                     "--lease-ms", "3000"]
        self.log = open(os.path.join(workdir, "coordinator.log"), "a")
        self.proc = None
        self.starts = 0

    def listening_lines(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read().count("listening on")

    def start(self):
        self.seen = self.listening_lines()  # a killed start may never have printed its line
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=self.log)
        self.starts += 1

    def wait_listening(self, timeout=60):
        """Seconds until this start printed "listening" (restore included), or None."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.listening_lines() > self.seen:
                return time.time() - t0
            time.sleep(0.01)
        return None

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def spec(steps):
    s = job_pb2.JobSpec(name="restart", schedule="1f1b", pp=1, microbatches=1, micro_batch_size=1, steps=steps)
    s.model.layers, s.model.hidden, s.model.heads, s.model.vocab, s.model.seq_len = 1, 8, 2, 16, 4
    return s


def main():
    binary, workdir, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    port = free_port()
    coord = Coordinator(binary, workdir, port)
    coord.start()
    stop = threading.Event()
    kills = [0]

    def killer():
        # Each start serves 0.2-0.9 s once it listens, then dies: on a loaded machine a start can
        # take longer than that, and killing it before it listened would prove nothing.
        rng = random.Random(7)
        while not stop.is_set():
            coord.wait_listening()
            if stop.wait(rng.uniform(0.2, 0.9)):
                break
            coord.kill()
            kills[0] += 1
            coord.start()

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    jobs = job_pb2_grpc.JobServiceStub(channel)
    workers = worker_pb2_grpc.WorkerServiceStub(channel)
    acked_jobs, acked_steps = set(), {}  # job id -> {step: loss}
    shown_events = {}  # job id -> {(kind, message, unix_ms)} GetJob answered with
    errors = 0
    thread = threading.Thread(target=killer)
    thread.start()
    # `seconds` at least, and on until enough happened to prove something (a loaded machine does
    # less in the same time), at most 10 x `seconds`.
    start = time.time()

    def enough():
        return (kills[0] >= 5 and sum(len(v) for v in acked_steps.values()) >= 20 and len(acked_jobs) >= 3)

    worker_id, job_id, step = "", "", 0
    while time.time() < start + seconds or (not enough() and time.time() < start + 10 * seconds):
        try:
            if not job_id:
                job_id = jobs.SubmitJob(job_pb2.SubmitJobRequest(spec=spec(1000)), timeout=2).job_id
                acked_jobs.add(job_id)
                step = 0
                reg = workers.Register(worker_pb2.RegisterRequest(device_kind="cpu", host="t",
                                                                  data_endpoint="127.0.0.1:9", worker_id=worker_id),
                                       timeout=2)
                worker_id = reg.worker_id
            loss = 1000.0 * int(job_id.split("-")[1]) + step  # unique per (job, step)
            batch = telemetry_pb2.TelemetryBatch(worker_id=worker_id, job_id=job_id, rank=0)
            action = batch.actions.add(step=step, start_ns=1000 + step, end_ns=2000 + step)
            action.action.op = 1  # F
            batch.steps.add(step=step, loss=loss, has_loss=True)
            ack = workers.Telemetry(iter([batch]), timeout=2)
            if ack.steps_accepted == 1:
                acked_steps.setdefault(job_id, {})[step] = loss
                step += 1
            workers.Heartbeat(worker_pb2.HeartbeatRequest(worker_id=worker_id), timeout=2)
            shown = jobs.GetJob(job_pb2.GetJobRequest(job_id=job_id), timeout=2)
            shown_events.setdefault(job_id, set()).update((e.kind, e.message, e.unix_ms) for e in shown.events)
            # More submits racing the kills: CUDA jobs stay PENDING here, never taking our worker.
            # A few dozen: each stays in the state every restart reloads, and thousands of them
            # (one per loop) made a loaded machine's restarts slower than the kills came, so
            # too few steps got through (a fresh-clone run: 2006 jobs, 13 steps in 150 s).
            if len(acked_jobs) < 40:
                cuda = spec(10)
                cuda.device = "cuda"
                acked_jobs.add(jobs.SubmitJob(job_pb2.SubmitJobRequest(spec=cuda), timeout=2).job_id)
        except grpc.RpcError as e:
            errors += 1
            if e.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND,
                            grpc.StatusCode.INVALID_ARGUMENT):
                # The job failed at a restart, or our worker does not hold it (yet): start another,
                # after cancelling this one, or it would wait in the queue for our worker, and
                # every restart reloads it (a loaded run piled up 2000 of them, each restart
                # slower, until too few steps got through).
                if job_id:
                    try:
                        jobs.CancelJob(job_pb2.CancelJobRequest(job_id=job_id), timeout=2)
                    except grpc.RpcError:
                        pass
                job_id = ""
            else:
                time.sleep(0.02)  # the coordinator is down or restarting
    ran_s = time.time() - start
    stop.set()
    thread.join()
    # A last clean restart, then every acknowledged record must be there.
    coord.kill()
    coord.start()
    restart = coord.wait_listening()
    if restart is None:
        print("the coordinator did not come back within 60 s")
        return 1
    missing = []
    checked_actions = [0]
    # A fresh channel: the old one backs off exponentially after 30 refused reconnects.
    jobs = job_pb2_grpc.JobServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))

    for jid in sorted(acked_jobs):
        job = None
        for attempt in range(50):  # UNAVAILABLE is retryable (a connection of the restart's moment)
            try:
                job = jobs.GetJob(job_pb2.GetJobRequest(job_id=jid), timeout=10, wait_for_ready=True)
                break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or attempt == 49:
                    missing.append(f"job {jid}: {e.code()} {e.details()}")
                    break
                time.sleep(0.1)
        if job is None:
            continue
        stored = {s.step: s.loss for s in job.steps}
        for st, loss in acked_steps.get(jid, {}).items():
            if stored.get(st) != loss:
                missing.append(f"{jid} step {st}: acknowledged loss {loss}, stored {stored.get(st)}")
        events = {(e.kind, e.message, e.unix_ms) for e in job.events}
        for kind, message, unix_ms in sorted(shown_events.get(jid, set()) - events):
            missing.append(f"{jid} event shown before a kill, gone after: {message!r} at {unix_ms}")
        if acked_steps.get(jid):
            # Each acknowledged batch carried one F action of its step: the run's trace has them.
            trace = json.loads(jobs.GetTrace(job_pb2.GetTraceRequest(job_id=jid), timeout=10).perfetto_json)
            entries = trace["traceEvents"] if isinstance(trace, dict) else trace
            traced = {e["args"]["step"] for e in entries if e.get("ph") == "X" and "step" in e.get("args", {})}
            for st in sorted(set(acked_steps[jid]) - traced):
                missing.append(f"{jid} step {st}: acknowledged action not in the trace")
            checked_actions[0] += len(acked_steps[jid])
    coord.kill()
    total_steps = sum(len(v) for v in acked_steps.values())
    print(f"{kills[0]} SIGKILLs and restarts in {ran_s:.0f} s; acknowledged {len(acked_jobs)} jobs and "
          f"{total_steps} telemetry steps, {checked_actions[0]} actions in traces, "
          f"{sum(len(v) for v in shown_events.values())} events shown ({errors} calls failed while it was down); "
          f"the last restart (reload "
          f"included) listened after {restart:.2f} s; missing after restart: {len(missing)}")
    for m in missing[:20]:
        print("MISSING", m)
    if kills[0] < 5 or total_steps < 20 or len(acked_jobs) < 3:
        print("too little happened to prove anything")
        return 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
