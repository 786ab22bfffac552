"""pipecoord's PyTorch worker: runs the user's own torch.nn.Module under pipecoord's plans and
health checks (docs/pytorch.md).

    python -m pipecoord.torch_worker --coordinator HOST:PORT [--import-path DIR]...
        [--device cpu|cuda] [--threads N] [--inject RULES]

It speaks the C++ worker daemon's protocol (proto/worker.proto; worker/daemon/daemon.h): it
registers with worker_kind "torch" (so it is handed only jobs whose spec.worker.kind is "torch"),
keeps its lease with heartbeats that also carry its progress and sync its clock to the
coordinator's, takes its assignments from its command stream, builds each stage it holds by
calling the job's spec.worker.module with (StageShard, ModelSpec), agrees on a torch.distributed
process group with its peers through the coordinator's rendezvous (with dp > 1, also one group of
each pipeline rank's replicas, for the gradient all-reduce), walks its job list
(torch_executor.py) streaming every action's timing, each step's loss and memory as telemetry,
reports how its part ended (naming the peers whose links broke), releases the job and waits for
the next. SIGTERM/SIGINT: a running job finishes its current step and fails naming it, then the
worker deregisters and exits.
"""
import argparse
import dataclasses
import datetime
import os
import signal
import socket
import sys
import threading
import time
import traceback

import grpc
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from proto import worker_pb2, worker_pb2_grpc

from pipecoord.coordinator_target import coordinator_target
from pipecoord.rank_layout import RankCoords, RankLayout
from pipecoord.stage_api import ModelSpec, StageShard, load_builder
from pipecoord.token_data import training_data
from pipecoord.torch_checkpoint import CheckpointWriter, resume
from pipecoord.torch_executor import Cancelled, Faults, Progress, RankExecutor
from pipecoord.torch_stages import StageRunner
from pipecoord.telemetry_outbox import TelemetryOutbox

WORKER_KIND = "torch"
SHUTDOWN_GRACE_S = 25.0


def log(message):
    print(f"torch worker: {message}", file=sys.stderr, flush=True)


def wall_ns():
    return time.time_ns()


def free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ClockSync:
    """NTP-style offset to the coordinator's clock from the heartbeat with the smallest round
    trip (worker/daemon/clock_sync.h)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.offset_ns, self._rtt = 0, -1

    def add(self, t0, t1, t2, t3):
        rtt = (t3 - t0) - (t2 - t1)
        offset = ((t1 - t0) + (t2 - t3)) // 2
        with self._lock:
            if self._rtt < 0 or rtt <= self._rtt:
                self._rtt, self.offset_ns = max(rtt, 0), offset

    def now_ns(self):
        with self._lock:
            return wall_ns() + self.offset_ns


class HeldJob:
    """An assignment from the moment it arrives until the coordinator heard its release."""

    def __init__(self, assignment):
        self.a = assignment
        self.cancelled = threading.Event()
        self.cancel_reason = ""
        self.stop_after_step = None  # a step to stop after (None: run to the end; -1: the current one)
        self.progress = Progress(assignment)
        self.running = False
        self.checkpoints = None  # its CheckpointWriter (spec.checkpointEvery)
        self.telemetry = None    # its TelemetryOutbox while it runs

    def cancel(self, reason):
        if not self.cancelled.is_set():
            self.cancel_reason = reason
            self.cancelled.set()


class StopAfterStep(Exception):
    pass


class TorchWorker:
    def __init__(self, args, stop):
        self.args, self.stop = args, stop
        target, options = coordinator_target(args.coordinator, "--coordinator")
        self.channel = grpc.insecure_channel(target, options=options)
        self.stub = worker_pb2_grpc.WorkerServiceStub(self.channel)
        self.clock = ClockSync()
        self.lock = threading.Lock()
        self.worker_id, self.lease_ms = "", 5000
        self.held = None
        self.job_thread = None
        self.commands_call = None
        self.draining = True
        self.faults = Faults(args.inject)
        self.endpoint = ""
        self.max_epoch = 0  # fencing: answers and commands of an older coordinator epoch are ignored

    def current_epoch(self, epoch):
        with self.lock:
            if epoch < self.max_epoch:
                return False
            self.max_epoch = epoch
            return True

    # --- registration, lease, commands ---
    def register(self):
        attempt = 0
        while not self.stop.is_set():
            req = worker_pb2.RegisterRequest(device_kind=self.args.device, device_memory_bytes=self.args.memory,
                                             host=self.args.host, data_endpoint=self.endpoint,
                                             worker_id=self.worker_id, worker_kind=WORKER_KIND)
            held = self.held
            if held is not None:
                req.held_job_id, req.held_session = held.a.job_id, held.a.session
            try:
                resp = self.stub.Register(req, timeout=5)
            except grpc.RpcError as e:
                if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED,
                                grpc.StatusCode.PERMISSION_DENIED):
                    raise SystemExit(f"torch worker: registration refused: {e.details()}")
                if not self.worker_id and "Failed parsing HTTP/2" in (e.details() or ""):
                    # Something answers, but not in gRPC (the coordinator's --http port?): waiting won't fix it.
                    raise SystemExit("torch worker: the coordinator address answers HTTP/1, not gRPC (the "
                                     f"coordinator's --http port?): give its gRPC --listen address ({e.details()})")
                if attempt % 10 == 0:
                    log(f"coordinator not reachable yet ({e.details()}), retrying")
                attempt += 1
                time.sleep(0.5)
                continue
            if not self.current_epoch(resp.epoch):
                log(f"a coordinator of an older epoch ({resp.epoch}) answered the registration: ignored")
                time.sleep(0.5)
                continue
            with self.lock:
                self.worker_id, self.lease_ms = resp.worker_id, resp.lease_ms
            log(f"registered as {resp.worker_id}, peers reach it at {self.endpoint}")
            if held is not None and held is self.held:
                if resp.held_job_adopted:
                    log(f"{held.a.job_id}: the coordinator took the job back; it goes on")
                elif not held.cancelled.is_set():
                    # Ended or restarted elsewhere while this worker could not hear about it.
                    log(f"{held.a.job_id}: the coordinator no longer runs it on this worker: stopping it")
                    held.cancel("the coordinator no longer runs the job on this worker")
            return True
        return False

    def heartbeat_loop(self):
        last_heard = time.monotonic()
        while not self.stop.is_set() or self.draining:
            lease_ms = self.lease_ms
            held = self.held
            req = worker_pb2.HeartbeatRequest(worker_id=self.worker_id)
            if held is not None and held.running:
                req.progress.CopyFrom(held.progress.snapshot())
            t0 = wall_ns()
            req.worker_send_ns = t0
            try:
                resp = self.stub.Heartbeat(req, timeout=lease_ms / 1000)
                if not self.current_epoch(resp.epoch):
                    raise ValueError("an older coordinator epoch")
                self.clock.add(t0, resp.coordinator_recv_ns, resp.coordinator_send_ns, wall_ns())
                if resp.lease_ms > 0:
                    self.lease_ms = resp.lease_ms  # the lease grows with the fleet (coordinator.h)
                mine = held is not None and resp.job_id == held.a.job_id
                if mine and held.checkpoints is not None and resp.checkpointed_steps > 0:
                    held.checkpoints.keep_from_step(resp.checkpointed_steps - 1)  # the coordinator's restart point
                if mine and held.telemetry is not None and resp.next_telemetry_step > 0:
                    held.telemetry.confirm(resp.next_telemetry_step)  # stored: no need to send again
                last_heard = time.monotonic()
            except (grpc.RpcError, ValueError):
                # No coordinator for the whole grace: none is coming back to read this job's telemetry
                # or to stop it (a lost lease is told at the next registration; peers' failures reach
                # the job through its data plane).
                grace = self.args.coordinator_grace_s
                if time.monotonic() - last_heard > grace and held is not None and not held.cancelled.is_set():
                    log(f"{held.a.job_id}: no answer from the coordinator for {grace:g} s: stopping the job")
                    held.cancel(f"no answer from the coordinator for {grace:g} s")
            for _ in range(10):
                if self.stop.is_set() and not self.draining:
                    break
                time.sleep(lease_ms / 30000)

    def commands_loop(self):
        while not self.stop.is_set():
            call = self.stub.Commands(worker_pb2.CommandsRequest(worker_id=self.worker_id))
            with self.lock:
                self.commands_call = call
            if self.stop.is_set():
                call.cancel()
            try:
                for cmd in call:
                    if self.stop.is_set():
                        break
                    self.handle(cmd)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.NOT_FOUND and not self.stop.is_set():
                    self.register()  # the lease was lost
            with self.lock:
                self.commands_call = None
            time.sleep(0.2)

    def handle(self, cmd):
        if not self.current_epoch(cmd.epoch):
            log(f"a command of an older coordinator epoch ({cmd.epoch}) was ignored")
            return
        which = cmd.WhichOneof("command")
        if which == "assign":
            if self.stop.is_set():
                log(f"{cmd.assign.job_id}: not started, the worker is shutting down")
                return
            old = self.held
            if old is not None:
                log(f"{cmd.assign.job_id}: assigned while {old.a.job_id} is still held: stopping that one first")
                old.cancel("superseded by " + cmd.assign.job_id)
            if self.job_thread is not None:
                self.job_thread.join()
            job = HeldJob(cmd.assign)
            self.held = job
            self.job_thread = threading.Thread(target=self.hold_job, args=(job,), daemon=True)
            self.job_thread.start()
        elif which == "stop_after":
            s = cmd.stop_after
            job = self.held
            if job is not None and job.a.job_id == s.job_id and job.a.session == s.session:
                log(f"{s.job_id}: the coordinator stops every rank after step {s.step} (a graceful stop)")
                job.stop_after_step = s.step
        elif which == "cancel_job_id":
            job = self.held
            if job is not None and job.a.job_id == cmd.cancel_job_id:
                log(f"{cmd.cancel_job_id}: cancelled by the coordinator")
                job.cancel("cancelled by the coordinator")

    # --- one job ---
    def hold_job(self, job):
        a = job.a
        log(f"{a.job_id}: running rank {a.rank} (dp {a.dp_rank})")
        try:
            self.run_job(job)
        finally:
            self.release(a)
            if self.held is job:
                self.held = None

    def rendezvous(self, job, key, value):
        """Publishes (value) or waits for (no value) `key` at the coordinator, in 1 s slices so a
        cancel ends the wait (worker/daemon/coordinator_rendezvous.cc)."""
        deadline = time.monotonic() + self.args.connect_timeout
        req = worker_pb2.RendezvousRequest(job_id=job.a.job_id, key=key, value=value.encode(), expected=1)
        while True:
            if job.cancelled.is_set():
                raise Cancelled()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f'rendezvous "{key}" at the coordinator (job {job.a.job_id}): nothing within '
                                   f'{self.args.connect_timeout} s')
            try:
                resp = self.stub.Rendezvous(req, timeout=min(1.0, left), metadata=(("worker-id", self.worker_id),))
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    continue
                raise RuntimeError(f'rendezvous "{key}": {e.code().name}: {e.details()}') from None
            if value:
                return value
            if len(resp.values) != 1:
                raise RuntimeError(f'rendezvous "{key}": {len(resp.values)} values, one was expected')
            return next(iter(resp.values.values())).decode()

    def run_job(self, job):
        a = job.a
        spec = a.spec
        layout = RankLayout.of_spec(spec)
        world = layout.world
        g = layout.global_rank(RankCoords(a.rank, a.dp_rank, a.tp_rank))
        telemetry = None
        failed_peers = []
        ok, message = True, ""
        group = False
        try:
            device = "cuda" if spec.device == "cuda" else "cpu"
            if device == "cuda":
                torch.cuda.set_device(self.args.gpu)
                device = f"cuda:{self.args.gpu}"
            build = load_builder(spec.worker.module)
            model = ModelSpec.from_proto(spec.model)
            data = training_data(spec)  # spec.data's windows (token_data.py), else the synthetic stream
            # The process group: global rank 0 hosts its store and says where through the coordinator.
            key = f"torch-store-{a.session}"
            if g == 0:
                store = self.rendezvous(job, key, f"{self.args.host}:{free_port(self.args.host)}")
            else:
                store = self.rendezvous(job, key, "")
            dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", init_method=f"tcp://{store}",
                                    rank=g, world_size=world,
                                    timeout=datetime.timedelta(seconds=self.args.peer_timeout))
            group = True
            # new_group is collective: every process creates every group, in the same order,
            # before the first step. Data parallel: one group per (pipeline rank, tp rank), of its
            # replicas (the layout's data group), for the gradient all-reduce.
            tp = layout.tp
            dp_group = None
            for r in range(spec.pp if layout.dp > 1 else 0):
                for t in range(tp):
                    members = dist.new_group(ranks=layout.data_group(layout.global_rank(RankCoords(r, 0, t))))
                    if (r, t) == (a.rank, a.tp_rank):
                        dp_group = members
            # The global gradient norm sums over each replica's pipeline and tensor-parallel ranks
            # (one group each).
            norm_group = None
            for d in range(layout.dp if spec.pp * tp > 1 else 0):
                ranks = sorted(layout.global_rank(RankCoords(r, d, t)) for r in range(spec.pp) for t in range(tp))
                members = dist.new_group(ranks=ranks)
                if d == a.dp_rank:
                    norm_group = members
            # Tensor parallel: one group per (pipeline rank, replica), handed to the stage builder.
            tp_group = None
            for d in range(layout.dp if tp > 1 else 0):
                for r in range(spec.pp):
                    members = dist.new_group(ranks=layout.tensor_group(layout.global_rank(RankCoords(r, d, 0))))
                    if (r, d) == (a.rank, a.dp_rank):
                        tp_group = members
            modules, shards = {}, {}
            for s in a.shards:
                shard = StageShard.from_proto(s)
                if tp > 1:
                    shard = dataclasses.replace(shard, tp_rank=a.tp_rank, tp_size=tp, tp_group=tp_group)
                module = build(shard, model)
                if not isinstance(module, torch.nn.Module):
                    raise TypeError(f"spec.worker.module {spec.worker.module!r} returned {type(module).__name__} "
                                    f"for stage {shard.stage}, not a torch.nn.Module")
                if tp > 1 and not any(isinstance(p, DTensor) for p in module.parameters()):
                    raise TypeError(f"spec.worker.module {spec.worker.module!r} returned a module without "
                                    f"tensor-parallel (DTensor) parameters for stage {shard.stage} at tp {tp}: a "
                                    f"builder for tp > 1 splits its module over shard.tp_group (docs/pytorch.md)")
                modules[shard.stage], shards[shard.stage] = module.to(device), shard
            runner = StageRunner(modules, shards, spec.microbatches, spec, device, dp_group, norm_group)
            job.checkpoints = self.prepare_checkpoints(a, g, runner)  # a restart loads its checkpoint
            # Kept and sent again while a coordinator restarts (telemetry_outbox.py).
            telemetry = TelemetryOutbox(self.stub)
            job.telemetry = telemetry
            executor = RankExecutor(a, runner, data, self.clock.now_ns, [r for r in self.faults.for_rank(g)],
                                    job.progress, job.cancelled, device, dp_group)
            job.running = True

            def on_step(batch):
                batch.worker_id, batch.job_id, batch.rank = self.worker_id, a.job_id, a.rank
                batch.dp_rank, batch.tp_rank, batch.session = a.dp_rank, a.tp_rank, a.session
                step = batch.steps[0].step
                stopping = job.stop_after_step is not None and step >= job.stop_after_step and step + 1 < spec.steps
                if job.checkpoints is not None and ((step + 1) % spec.checkpoint_every == 0 or stopping):
                    try:
                        job.checkpoints.save(runner, step)  # synchronous: this step's summary reports it
                    except RuntimeError as e:
                        raise RuntimeError(f"step {step}: {e}") from None
                    batch.steps[0].checkpointed_steps.append(step)
                telemetry.put(batch)  # raises the coordinator's refusal: the rank stops
                if stopping:
                    raise StopAfterStep(f"shutting down: stopped after step {step} of {spec.steps}")

            try:
                executor.run(on_step)
            finally:
                failed_peers = executor.failed_peers
                job.running = False
            telemetry.close(self.args.coordinator_grace_s)  # delivered before the result
        except Cancelled:
            ok, message = False, f"stopped: {job.cancel_reason}"
        except StopAfterStep as e:
            ok, message = False, str(e)
        except Exception as e:  # noqa: BLE001 (every failure is reported to the coordinator)
            ok, message = False, f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) else str(e)
            if job.cancelled.is_set():
                message = f"stopped: {job.cancel_reason}"
            elif self.args.verbose:
                traceback.print_exc()
        if telemetry is not None and not ok:
            try:
                telemetry.close(5)
            except Exception:  # noqa: BLE001 (the job's result is what is reported)
                pass
        job.telemetry = None
        self.report(a, ok, message, failed_peers if not ok else [])
        if group:
            try:
                dist.destroy_process_group()
            except Exception as e:  # noqa: BLE001
                log(f"{a.job_id}: closing the process group: {e}")

    def prepare_checkpoints(self, a, g, runner):
        """worker/daemon/checkpointing.cc's PrepareCheckpoints: a restart (start_step > 0) loads
        global rank g's checkpoint of step start_step - 1; a job with spec.checkpointEvery gets
        its writer (None without)."""
        saves = a.spec.checkpoint_every > 0
        directory = self.args.checkpoint_dir
        if (saves or a.start_step > 0) and not directory:
            raise RuntimeError("spec.checkpointEvery: the job saves checkpoints but this worker has no --checkpoint-dir")
        if a.start_step > 0:
            # A restart with another dp (a ZeRO job that lost a replica's worth of workers): this
            # rank's coordinates in every old replica, whose files hold the moments it now steps.
            sources = None
            if a.checkpoint_dp > 0 and a.checkpoint_dp != max(1, a.spec.dp):
                now = RankLayout.of_spec(a.spec)
                then = RankLayout(now.pp, a.checkpoint_dp, now.tp)
                c = now.coords(g)
                sources = [then.global_rank(RankCoords(c.pp, d, c.tp)) for d in range(then.dp)]
            try:
                resume(runner, directory, a.job_id, g, a.start_step - 1, sources)
            except (OSError, ValueError) as e:
                raise RuntimeError(f"resuming at step {a.start_step}: {e}") from None
            log(f"{a.job_id}: resumed from the checkpoint of step {a.start_step - 1}")
        if not saves:
            return None
        writer = CheckpointWriter(directory, a.job_id, g)
        writer.keep_from_step(a.start_step - 1)  # the restart point this attempt started from
        return writer

    def report(self, a, ok, message, unreachable):
        log(f"{a.job_id}: {'done' if ok else message}")
        # Retried while no coordinator answers (one may be restarting), up to the grace.
        give_up = time.monotonic() + self.args.coordinator_grace_s
        attempt = 0
        while True:
            req = worker_pb2.ReportResultRequest(worker_id=self.worker_id, job_id=a.job_id, rank=a.rank, ok=ok,
                                                 message=message, session=a.session, unreachable_peers=unreachable)
            try:
                self.stub.ReportResult(req, timeout=10)
                return
            except grpc.RpcError as e:
                if e.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
                                grpc.StatusCode.INVALID_ARGUMENT) or time.monotonic() > give_up or \
                        (self.stop.is_set() and not self.draining):
                    log(f"{a.job_id}: result not heard: {e.details()}")
                    return
                if attempt % 20 == 0:
                    log(f"{a.job_id}: result not heard yet ({e.details()}), retrying")
                attempt += 1
                time.sleep(0.25)

    def release(self, a):
        attempt = 0
        while not self.stop.is_set() or self.draining:
            try:
                self.stub.ReleaseJob(worker_pb2.ReleaseJobRequest(worker_id=self.worker_id, job_id=a.job_id,
                                                                  session=a.session), timeout=5)
                return
            except grpc.RpcError as e:
                if e.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
                                grpc.StatusCode.INVALID_ARGUMENT):
                    return
                if attempt % 20 == 0:
                    log(f"{a.job_id}: release not heard yet ({e.details()}), retrying")
                attempt += 1
                time.sleep(0.25)

    # --- the whole life ---
    def run(self):
        self.endpoint = f"{self.args.host}:{free_port(self.args.host)}"
        if not self.register():
            return 1
        heartbeat = threading.Thread(target=self.heartbeat_loop, daemon=True)
        heartbeat.start()
        commands = threading.Thread(target=self.commands_loop, daemon=True)
        commands.start()
        while not self.stop.wait(0.1):
            pass
        with self.lock:
            if self.commands_call is not None:
                self.commands_call.cancel()
        job = self.held
        if job is not None:
            if job.running:
                # Every rank of the job stops after the same step and checkpoints it (the
                # coordinator's Drain), so the next attempt resumes there; without its answer,
                # this rank finishes its current step.
                step = -1
                try:
                    step = self.stub.Drain(worker_pb2.DrainRequest(worker_id=self.worker_id, job_id=job.a.job_id,
                                                                   session=job.a.session), timeout=5).stop_after_step
                except grpc.RpcError as e:
                    log(f"{job.a.job_id}: drain not heard ({e.details()}): finishing the current step")
                if step >= 0:
                    log(f"shutting down: every rank of {job.a.job_id} stops after step {step} and checkpoints it")
                else:
                    log(f"shutting down: finishing the current step of {job.a.job_id}")
                if job.stop_after_step is None or step >= 0:
                    job.stop_after_step = step
            else:
                job.cancel("the worker is shutting down")
        end = time.monotonic() + self.args.shutdown_grace
        while self.held is not None and time.monotonic() < end:
            time.sleep(0.02)
        if self.held is not None:
            self.held.cancel("the worker's shutdown grace period ran out")
            if self.job_thread is not None:
                self.job_thread.join(timeout=5)
        self.draining = False
        try:
            self.stub.Deregister(worker_pb2.DeregisterRequest(worker_id=self.worker_id), timeout=5)
            log(f"deregistered {self.worker_id}")
        except grpc.RpcError as e:
            log(f"deregister not heard: {e.details()}")
        return 0


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m pipecoord.torch_worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--coordinator", required=True, help="HOST:PORT of the coordinator; HOST:PORT,HOST:PORT,... for the coordinators of a "
                   "high-availability group (the worker follows the active one)")
    p.add_argument("--import-path", action="append", default=[],
                   help="a directory put first on sys.path, where the jobs' modules are found (repeatable)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--gpu", type=int, default=0, help="the CUDA device index (--device cuda)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--host", default="127.0.0.1", help="the address peers reach this worker at")
    p.add_argument("--memory", type=int, default=0, help="memory offered to jobs, bytes (0: not reported)")
    p.add_argument("--inject", default="", help="faults: slow:RANK:FACTOR[:STEP], hang:RANK:STEP, corrupt:RANK:STEP")
    p.add_argument("--connect-timeout", type=float, default=30.0, help="seconds to wait for the job's peers")
    p.add_argument("--peer-timeout", type=float, default=300.0, help="seconds a transfer may wait for its peer")
    p.add_argument("--shutdown-grace", type=float, default=SHUTDOWN_GRACE_S)
    p.add_argument("--coordinator-grace-s", type=float, default=7200.0,
                   help="seconds a running job goes on with no coordinator answering (default 7200): it keeps "
                        "training and its telemetry while a coordinator restarts or fails over, then stops")
    p.add_argument("--checkpoint-dir", default="",
                   help="directory for the checkpoints of jobs with checkpointEvery (DIR/JOB/rank-G/step-N.safetensors); "
                        "a restarted job resumes from it, so every worker of a job needs the same (shared) one")
    p.add_argument("--verbose", action="store_true", help="print the traceback of a failed job")
    args = p.parse_args(argv)
    host, _, port = args.coordinator.rpartition(":")
    if "://" not in args.coordinator and not args.coordinator.startswith(("unix:", "ipv4:", "ipv6:")) and \
            (not host or not port.isdigit() or not 0 < int(port) < 65536):
        p.error(f"--coordinator: must be HOST:PORT (the coordinator's gRPC --listen address, e.g. 127.0.0.1:50051), "
                f"got {args.coordinator!r}")
    try:
        Faults(args.inject)
    except ValueError as e:
        p.error(str(e))
    if args.threads < 1:
        p.error("--threads must be >= 1")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sys.path[:0] = [os.path.abspath(d) for d in args.import_path]
    torch.set_num_threads(args.threads)
    if hasattr(torch._C, "_ensureCUDADeviceGuardSet") and not torch.cuda.is_available():
        # PyTorch 2.11's CUDA build on a machine without a GPU installs a no-op CUDA device guard
        # the first time a FakeTensorMode is entered (DTensor's sharding propagation does, under
        # tensor parallelism); done first in one job thread and then in the next job's thread it
        # crashes the process (SIGSEGV), done once in the main thread it never does.
        torch._C._ensureCUDADeviceGuardSet()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return TorchWorker(args, stop).run()


if __name__ == "__main__":
    sys.exit(main())
