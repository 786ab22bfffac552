"""Walks one rank's job list step after step on a PyTorch worker, as the C++ Executor does
(worker/daemon/executor.cc): F, B, W, BW on the rank's StageRunner; SEND_F/SEND_B as
torch.distributed.isend and RECV_F/RECV_B as irecv posted at their place in the list (the compute
action that needs the tensor waits for it, and that wait is idle, not busy); PROBE (the known-answer
GEMM the coordinator checks); OPT. Every action is timed on the coordinator's clock and reported
in the step's TelemetryBatch with the step's loss and memory.

Data parallel (dp > 1), as the C++ Executor (worker/daemon/executor.h): replica d reads
micro-batches d*m .. d*m+m-1 of the step (the C++ TrainingData's order) and the replicas average
their gradients with torch.distributed.all_reduce on the process group of the rank's replicas (the
global ranks d*pp + rank, every d; torch_worker.py creates one per pipeline rank), one of two ways,
as the plan's lists say:
- stage by stage (the plan has REDUCE_GRAD: CPU jobs, jobplan::ReducesGradientsPerStage): a
  REDUCE_GRAD hands its stage's gradients to the rank's reduction lane, a background thread that
  runs the all-reduces one at a time in list order, and returns at once, so the reduction overlaps
  the rank's other stages' cool-down; OPT (or the step's end) waits for them all. A REDUCE_GRAD's
  timing is its all-reduce's span on the lane, OPT's the optimizer step after that wait.
- after the step (no REDUCE_GRAD: cuda jobs, an imported CSV without them): OPT all-reduces every
  gradient of the rank first, inside its timing.
Each replica's head reports the mean loss of its own micro-batches; the coordinator averages the
replicas' (coordinator/step_aggregator.cc), which is the step's mean over all of them.

Tensors between ranks: float32 [micro_batch_size, seq_len, hidden] on the job's device (gloo on the
CPU, NCCL on CUDA), tagged by (step, activations or gradients, the consuming stage, micro-batch).
"""
import queue
import threading
import time
from concurrent.futures import Future

import torch
import torch.distributed as dist

from proto import schedule_pb2, telemetry_pb2

from pipecoord.rank_layout import RankCoords, RankLayout
from pipecoord.synthetic_data import probe_checksum
from pipecoord.torch_eval import RankValidation, evaluates_after

ACTIVATIONS, GRADIENTS = 0, 1
COMPUTE = (schedule_pb2.F, schedule_pb2.B, schedule_pb2.W, schedule_pb2.BW)


def describe(a):
    return f"{a.stage}{schedule_pb2.Op.Name(a.op)}{a.microbatch}"


class Cancelled(Exception):
    pass


class Faults:
    """--inject RULE[,RULE...] as the C++ worker reads it (worker/daemon/fault_injection.h), for the
    rules a PyTorch worker runs: slow:RANK:FACTOR[:STEP], hang:RANK:STEP, corrupt:RANK:STEP (RANK
    is the global rank)."""

    def __init__(self, text=""):
        self.rules = []
        for rule in filter(None, (text or "").split(",")):
            parts = rule.split(":")
            kind = parts[0]
            bad = lambda why: ValueError(f"--inject {rule}: {why}")
            if kind not in ("slow", "hang", "corrupt"):
                raise bad(f'KIND must be slow, hang or corrupt on a torch worker, got "{kind}"')
            if len(parts) != 3 and not (kind == "slow" and len(parts) == 4):
                raise bad("must be slow:RANK:FACTOR[:STEP], hang:RANK:STEP or corrupt:RANK:STEP")
            try:
                rank = int(parts[1])
                value = float(parts[2]) if kind == "slow" else int(parts[2])
                step = int(parts[3]) if len(parts) == 4 else (0 if kind == "slow" else value)
            except ValueError:
                raise bad("RANK, STEP must be integers and FACTOR a number") from None
            if kind == "slow" and not 1 <= value <= 1000:
                raise bad(f"FACTOR must be a number in [1, 1000], got {parts[2]!r}")
            self.rules.append((kind, rank, value, step))

    def for_rank(self, global_rank):
        return [r for r in self.rules if r[1] == global_rank]


def all_reduce_mean(tensors, group, size):
    """Averages `tensors` (gradients, in place) over the `size` processes of `group`: one flat
    all-reduce (sum) of them all, then / size."""
    if not tensors:
        return
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    flat.div_(size)
    offset = 0
    for t in tensors:
        t.copy_(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()


class ReduceLane:
    """The rank's gradient-reduction lane: a daemon thread that runs the submitted all-reduces one
    at a time, in submission order (every replica submits its stages in the same list order, as a
    process group's collectives require). submit() returns a Future of the (start_ns, end_ns) on
    `clock_ns`; a daemon thread, so a peer that never answers cannot keep the process alive."""

    def __init__(self, clock_ns):
        self.clock_ns = clock_ns
        self.jobs = queue.Queue()
        threading.Thread(target=self._loop, daemon=True).start()

    def submit(self, fn):
        done = Future()
        self.jobs.put((fn, done))
        return done

    def close(self):
        """Ends the thread once what was submitted ran (a job's end: one lane per job)."""
        self.jobs.put(None)

    def _loop(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fn, done = job
            start = self.clock_ns()
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 (handed to the waiting step)
                done.set_exception(e)
                continue
            done.set_result((start, self.clock_ns()))


class Progress:
    """Where the rank is inside its step, for the heartbeat (the coordinator's hang check)."""

    def __init__(self, a):
        self._lock = threading.Lock()
        self._p = telemetry_pb2.Progress(job_id=a.job_id, rank=a.rank, dp_rank=a.dp_rank, tp_rank=a.tp_rank, step=0,
                                         action_index=-1,
                                         wait_peer=-1)
        self._moved_ns = time.monotonic_ns()  # when (step, action_index) last changed

    def start(self, step, index, action, input_peer):
        with self._lock:
            self._moved_ns = time.monotonic_ns()
            self._p.step, self._p.action_index = step, index
            self._p.action.CopyFrom(action)
            self._p.waiting, self._p.wait_peer = input_peer >= 0, input_peer

    def input_ready(self):
        with self._lock:
            self._p.waiting, self._p.wait_peer = False, -1

    def done(self):
        with self._lock:
            self._p.actions_done += 1

    def snapshot(self):
        with self._lock:
            p = telemetry_pb2.Progress()
            p.CopyFrom(self._p)
            # Measured now, just before the heartbeat is sent: the coordinator dates the last
            # progress by it (proto/telemetry.proto), with no clock sync.
            p.progress_age_ns = time.monotonic_ns() - self._moved_ns
            return p


class RankExecutor:
    """`a`: the Assignment; `runner`: its StageRunner; `data`: the SyntheticData stream;
    `clock_ns`: the coordinator's clock; `cancelled`: a threading.Event; `dp_group`: the process
    group of this pipeline rank's dp replicas (None when dp is 1)."""

    def __init__(self, a, runner, data, clock_ns, faults, progress, cancelled, device, dp_group=None):
        self.a, self.runner, self.data, self.clock_ns = a, runner, data, clock_ns
        self.faults, self.progress, self.cancelled = faults, progress, cancelled
        self.device = torch.device(device)
        spec = a.spec
        self.pp, self.rank, self.dp_rank = spec.pp, a.rank, a.dp_rank
        self.layout = RankLayout.of_spec(spec)
        self.g = self.layout.global_rank(RankCoords(a.rank, a.dp_rank, a.tp_rank))
        self.dp = self.layout.dp
        if self.dp > 1 and dp_group is None:
            raise ValueError(f"dp {self.dp}: the rank's replicas need a process group")
        self.dp_group = dp_group
        self.reduces_by_stage = any(act.op == schedule_pb2.REDUCE_GRAD for act in a.jobs.actions)
        self.lane = ReduceLane(clock_ns) if self.dp > 1 and self.reduces_by_stage else None
        self.stage_reduces = []  # (stage, timing entry, Future) launched this step, in list order
        self.m = spec.microbatches
        self.stage_to_rank = list(a.stage_to_rank)
        self.stages = len(self.stage_to_rank)
        self.boundary = (spec.micro_batch_size, spec.model.seq_len, spec.model.hidden)
        self.probe_size = spec.health.probe_size or 32
        self.seed = spec.model.seed
        self.local = {}     # (channel, consumer stage, mb) -> tensor handed between stages of this rank
        self.outbox = {}    # (channel, producer stage, mb) -> tensor waiting for its SEND
        self.recvs = {}     # (channel, consumer stage, mb) -> (work, buffer)
        self.sends = []     # (work, tensor, peer) of this step
        self.failed_peers = []  # global ranks whose transfer failed (their link broke)
        self.hung = False

    def global_rank(self, rank):
        """The global rank of pipeline rank `rank` in this rank's replica (rank_layout.py)."""
        return self.layout.at_pipeline_rank(self.g, rank)

    def tag(self, step, channel, consumer, mb):
        return ((step % 512) * 2 + channel) * (self.stages * self.m) + consumer * self.m + mb

    def input_peer(self, a):
        producer = -1
        if a.op == schedule_pb2.F:
            producer = a.stage - 1
        elif a.op in (schedule_pb2.B, schedule_pb2.BW):
            producer = a.stage + 1 if a.stage + 1 < self.stages else -1
        if producer < 0 or producer >= self.stages or self.stage_to_rank[producer] == self.rank:
            return -1
        return self.stage_to_rank[producer]

    # --- tensors between stages ---
    def post_recv(self, step, channel, consumer, mb, peer):
        key = (channel, consumer, mb)
        if key not in self.recvs:
            buf = torch.empty(self.boundary, dtype=torch.float32, device=self.device)
            work = dist.irecv(buf, src=self.global_rank(peer), tag=self.tag(step, channel, consumer, mb))
            self.recvs[key] = (work, buf)

    def take_input(self, step, channel, producer, consumer, mb):
        """The tensor `consumer` needs from `producer` (None: model input or loss)."""
        if producer < 0 or producer >= self.stages:
            return None
        if self.stage_to_rank[producer] == self.rank:
            return self.local.pop((channel, consumer, mb))
        self.post_recv(step, channel, consumer, mb, self.stage_to_rank[producer])
        work, buf = self.recvs.pop((channel, consumer, mb))
        self.wait(work, self.stage_to_rank[producer])
        return buf

    def wait(self, work, peer):
        try:
            work.wait()
        except Exception:
            self.failed_peers.append(self.global_rank(peer))
            raise

    def collective_failed(self, members):
        """A collective over `members` (global ranks) broke: gloo does not say whose link, so every
        other member is a suspect; the coordinator waits for the one that has not spoken
        (coordinator/attempt_outcome.h) and, if it lost its lease, names it."""
        self.failed_peers.extend(p for p in members if p != self.g and p not in self.failed_peers)

    def hand_on(self, channel, producer, consumer, mb, tensor):
        if self.stage_to_rank[consumer] == self.rank:
            self.local[(channel, consumer, mb)] = tensor
        else:
            self.outbox[(channel, producer, mb)] = tensor

    # --- data parallel ---
    def launch_stage_reduce(self, stage, entry):
        """REDUCE_GRAD: stage `stage`'s gradients onto the lane; its timing (`entry`) is set when
        it is done (finish_stage_reduces)."""
        grads = self.runner.stage_gradients(stage)
        done = self.lane.submit(lambda: all_reduce_mean(grads, self.dp_group, self.dp))
        self.stage_reduces.append((stage, entry, done))

    def finish_stage_reduces(self, timings):
        """Waits for this step's launched all-reduces (idle time) and sets their timings; the first
        failure names the stage and its REDUCE_GRAD."""
        first = None
        for stage, entry, done in self.stage_reduces:
            try:
                start, end = done.result()
            except Exception as e:  # noqa: BLE001
                self.collective_failed(self.layout.data_group(self.g))
                if first is None:
                    first = RuntimeError(f"the gradient all-reduce of stage {stage} (its REDUCE_GRAD, "
                                         f"{stage}REDUCE_GRAD): {type(e).__name__}: {e}")
                continue
            timings[entry].start_ns, timings[entry].end_ns = start, max(start, end)
        self.stage_reduces.clear()
        if first is not None:
            raise first

    # --- health hooks (worker/daemon/health_hooks.cc) ---
    def before_compute(self, step):
        for kind, _, _, at in self.faults:
            if kind == "hang" and at == step and not self.hung:
                self.hung = True
                self.cancelled.wait()
                raise Cancelled()

    def after_compute(self, step, elapsed_ns):
        for kind, _, factor, from_step in self.faults:
            if kind == "slow" and factor > 1 and step >= from_step:
                time.sleep((factor - 1) * elapsed_ns / 1e9)

    def probe(self, step):
        checksum = probe_checksum(self.seed, step, self.probe_size)
        if any(kind == "corrupt" and at == step for kind, _, _, at in self.faults):
            checksum ^= 1  # a different answer, as one flipped bit of the product gives
        return checksum

    # --- one action ---
    def run_action(self, a, step, timings):
        """Runs `a` and appends its ActionTiming to `timings`."""
        s, mb = a.stage, a.microbatch
        start = wait_start = self.clock_ns()
        checksum = 0
        compute = a.op in COMPUTE

        def begin():
            nonlocal start
            start = self.clock_ns()
            self.progress.input_ready()
            self.before_compute(step)
            return time.perf_counter_ns()

        def end(t0):
            self.after_compute(step, time.perf_counter_ns() - t0)

        op = a.op
        if op == schedule_pb2.F:
            shard = self.runner.shards[s]
            x = targets = None
            if shard.has_embedding or shard.has_head:  # replicas read disjoint micro-batches
                tokens, targets = self.data.batch(step, self.dp_rank * self.m + mb)
                x = tokens.to(self.device) if shard.has_embedding else None
                targets = targets.to(self.device) if shard.has_head else None
            if not shard.has_embedding:
                x = self.take_input(step, ACTIVATIONS, s - 1, s, mb)
            t0 = begin()
            out = self.runner.forward(s, mb, x, targets)
            end(t0)
            if s + 1 < self.stages:
                self.hand_on(ACTIVATIONS, s, s + 1, mb, out)
        elif op in (schedule_pb2.B, schedule_pb2.BW):
            grad = self.take_input(step, GRADIENTS, s + 1 if s + 1 < self.stages else -1, s, mb)
            t0 = begin()
            dx = self.runner.backward_input(s, mb, grad) if op == schedule_pb2.B else \
                self.runner.backward_full(s, mb, grad)
            end(t0)
            if s > 0:
                self.hand_on(GRADIENTS, s, s - 1, mb, dx.detach().contiguous())
        elif op == schedule_pb2.W:
            t0 = begin()
            self.runner.backward_weight(s, mb)
            end(t0)
        elif op == schedule_pb2.SEND_F:
            t = self.outbox.pop((ACTIVATIONS, s, mb))
            self.sends.append((dist.isend(t, dst=self.global_rank(a.peer), tag=self.tag(step, ACTIVATIONS, s + 1, mb)), t,
                               a.peer))
        elif op == schedule_pb2.SEND_B:
            t = self.outbox.pop((GRADIENTS, s, mb))
            self.sends.append((dist.isend(t, dst=self.global_rank(a.peer), tag=self.tag(step, GRADIENTS, s - 1, mb)), t,
                               a.peer))
        elif op == schedule_pb2.RECV_F:
            self.post_recv(step, ACTIVATIONS, s, mb, a.peer)
        elif op == schedule_pb2.RECV_B:
            self.post_recv(step, GRADIENTS, s, mb, a.peer)
        elif op == schedule_pb2.PROBE:
            checksum = self.probe(step)
        elif op == schedule_pb2.OPT:
            # Stage by stage: the reductions ran on the lane; waiting for them is idle time.
            self.finish_stage_reduces(timings)
            start = self.clock_ns()
            try:
                if self.dp > 1 and not self.reduces_by_stage:  # one all-reduce of every gradient now
                    all_reduce_mean(self.runner.all_gradients(), self.dp_group, self.dp)
                self.runner.optimizer_step()  # the global norm's all-reduce, ZeRO's broadcasts
            except RuntimeError:
                # Which group broke is not told apart: the replica's pipeline (the norm) and its
                # data group (all-reduce, ZeRO) are both suspects.
                self.collective_failed(self.layout.pipeline_group(self.g) + self.layout.data_group(self.g))
                raise
        elif op == schedule_pb2.REDUCE_GRAD:
            if self.dp > 1:  # a group of one has nothing to reduce
                self.launch_stage_reduce(s, len(timings))
        elif op == schedule_pb2.OVERLAP_F_B:
            pass  # opens a slot: the F and the backward after it run one after the other (as the C++ worker)
        else:
            raise NotImplementedError(f"action {describe(a)}: a torch worker runs F, B, W, BW, SEND/RECV, PROBE, "
                                      f"OPT, REDUCE_GRAD and OVERLAP_F_B, not {schedule_pb2.Op.Name(op)}")
        t = timings.add()
        t.action.CopyFrom(a)
        t.step = step
        t.start_ns = start
        t.end_ns = max(start, self.clock_ns())
        t.wait_ns = max(0, start - wait_start) if compute else 0
        t.wait_peer = self.input_peer(a) if compute else -1
        if op == schedule_pb2.PROBE:
            t.probe_checksum = checksum
        self.progress.done()

    def run(self, on_step):
        """Runs steps start_step..steps-1, calling on_step(TelemetryBatch) with each step's action
        timings and summary (the caller fills in who sends it)."""
        try:
            self._run(on_step)
        finally:
            if self.lane is not None:
                self.lane.close()

    def _run(self, on_step):
        jobs = self.a.jobs.actions
        for step in range(self.a.start_step, self.a.spec.steps):
            batch = telemetry_pb2.TelemetryBatch()
            self.runner.reset_peak()
            for i, act in enumerate(jobs):
                if self.cancelled.is_set():
                    raise Cancelled()
                self.progress.start(step, i, act, self.input_peer(act))
                try:
                    self.run_action(act, step, batch.actions)
                except Cancelled:
                    raise
                except Exception as e:
                    if self.cancelled.is_set():
                        raise Cancelled() from e
                    raise RuntimeError(f"step {step}, position {i} ({describe(act)}): {type(e).__name__}: {e}") from e
            if self.stage_reduces:  # a list with REDUCE_GRAD and no OPT after them
                try:
                    self.finish_stage_reduces(batch.actions)
                except Exception as e:
                    raise RuntimeError(f"step {step}: {e}") from e
            for work, _, peer in self.sends:  # what this step sent is received before its buffers go
                self.wait(work, peer)
            self.sends.clear()
            summary = batch.steps.add()
            summary.step = step
            loss = self.runner.step_loss()
            if loss is not None:
                summary.loss, summary.has_loss = loss, True
            if self.runner.last_grad_norm is not None:  # this step's OPT: its global norm and learning rate
                summary.grad_norm, summary.has_grad_norm = self.runner.last_grad_norm, True
                summary.learning_rate = self.runner.last_lr
            in_use, peak, reserved = self.runner.memory()
            summary.memory_in_use_bytes, summary.memory_peak_bytes, summary.memory_reserved_bytes = in_use, peak, reserved
            if evaluates_after(self.a.spec, step):  # after the memory figures (torch_eval.py)
                try:
                    val = RankValidation(self, Cancelled).run(step)
                except Cancelled:
                    raise
                except Exception as e:
                    raise RuntimeError(f"step {step}: {e}") from e
                if val is not None:
                    summary.val_loss, summary.has_val_loss = val, True
            on_step(batch)
