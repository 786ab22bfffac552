"""TelemetryOutbox: one rank's telemetry on its way to the coordinator, which may be away (a crash,
a restart, a failover) while the rank trains on: the PyTorch worker's twin of
worker/daemon/telemetry_outbox.h, with the same rules.

- put() never blocks on the coordinator: batches queue, and a sender thread streams them
  (WorkerService.Telemetry), one stream per burst of waiting batches (usually one step's), so the
  stream's end says at once whether the coordinator stored or refused them.
- A batch is kept until the coordinator says it is stored (a stream that ended OK, or a
  heartbeat's next_telemetry_step: confirm()); after a break everything not confirmed is sent
  again, and the coordinator acknowledges, without counting, a step it already has.
- Bounded: past max_bytes of waiting batches the oldest lose their action timings, never their
  step summaries; dropped_actions says how many.
- A refusal (INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION, UNAUTHENTICATED) is sticky:
  put() raises it from then on, and the rank stops. Anything else is retried.
"""

import collections
import sys
import threading
import time

import grpc

REFUSALS = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAUTHENTICATED)


class TelemetryRefused(RuntimeError):
    pass


def _step_of(batch):
    if batch.steps:
        return batch.steps[0].step
    return batch.actions[0].step if batch.actions else -1


class TelemetryOutbox:
    def __init__(self, stub, max_bytes=256 << 20, retry_s=0.2):
        self._stub, self._max_bytes, self._retry_s = stub, max_bytes, retry_s
        self._cv = threading.Condition()
        self._entries = collections.deque()  # [step, bytes, batch], not confirmed, in put order
        self._bytes = 0
        self.dropped_actions = 0
        self._refused = None
        self._closing = False
        self._deadline = None
        self._done = False
        self._call = None
        self._thread = threading.Thread(target=self._send, daemon=True)
        self._thread.start()

    def put(self, batch):
        with self._cv:
            if self._refused is not None:
                raise self._refused
            if self._closing:
                raise RuntimeError("telemetry: the outbox is closed")
            size = batch.ByteSize()
            self._entries.append([_step_of(batch), size, batch])
            self._bytes += size
            for entry in list(self._entries)[:-1]:  # over the bound: the oldest give up their actions
                if self._bytes <= self._max_bytes:
                    break
                if entry[2].actions:
                    self.dropped_actions += len(entry[2].actions)
                    del entry[2].actions[:]
                    now = entry[2].ByteSize()
                    self._bytes -= entry[1] - now
                    entry[1] = now
            self._cv.notify_all()

    def confirm(self, next_step):
        with self._cv:
            while self._entries and 0 <= self._entries[0][0] < next_step:
                self._bytes -= self._entries.popleft()[1]

    def waiting(self):
        with self._cv:
            return len(self._entries)

    def _past_deadline(self):
        return self._closing and time.monotonic() >= self._deadline

    def _send(self):
        outage_logged = False
        with self._cv:
            while True:
                self._cv.wait_for(lambda: self._closing or self._entries)
                if self._closing and not self._entries:
                    break
                # Copies: put() may strip a waiting batch's actions while gRPC serializes the burst.
                burst = list(self._entries)
                copies = []
                for entry in burst:
                    copy = type(entry[2])()
                    copy.CopyFrom(entry[2])
                    copies.append(copy)
                timeout = max(0.0, self._deadline - time.monotonic()) if self._closing else None
                self._cv.release()
                error = None
                try:
                    call = self._stub.Telemetry.future(iter(copies), timeout=timeout)
                    with self._cv:
                        self._call = call
                    call.result()
                except grpc.RpcError as e:
                    error = e
                finally:
                    self._cv.acquire()
                    self._call = None
                if error is None:
                    # The burst was the queue's front; confirm() may have dropped some of it since.
                    gone = next((k for k, e in enumerate(burst) if self._entries and e is self._entries[0]), len(burst))
                    for _ in range(len(burst) - gone):
                        self._bytes -= self._entries.popleft()[1]
                    if outage_logged:
                        print("torch worker: telemetry: delivered again", file=sys.stderr, flush=True)
                    outage_logged = False
                    continue
                if error.code() in REFUSALS:
                    self._refused = TelemetryRefused(f"telemetry refused: {error.details()}")
                    break
                if not outage_logged:
                    print(f"torch worker: telemetry: stream to the coordinator broke ({error.details()}); keeping "
                          f"{len(self._entries)} batch(es), retrying", file=sys.stderr, flush=True)
                    outage_logged = True
                if self._past_deadline():
                    break
                self._cv.wait_for(self._past_deadline, timeout=self._retry_s)
                if self._past_deadline():
                    break
            if self.dropped_actions:
                print(f"torch worker: telemetry: {self.dropped_actions} action timing(s) dropped while the coordinator "
                      f"was away (bound {self._max_bytes} bytes)", file=sys.stderr, flush=True)
            self._done = True
            self._cv.notify_all()

    def close(self, timeout_s):
        """Sends what is left and stops, waiting up to timeout_s for a coordinator to take it.
        Raises the refusal, or TimeoutError naming how many batches were not delivered."""
        with self._cv:
            self._closing = True
            self._deadline = time.monotonic() + timeout_s
            self._cv.notify_all()
            if not self._cv.wait_for(lambda: self._done, timeout=timeout_s + 1) and self._call is not None:
                self._call.cancel()
        self._thread.join()
        with self._cv:
            if self._refused is not None:
                raise self._refused
            if self._entries:
                raise TimeoutError(f"telemetry: {len(self._entries)} batch(es) not delivered: no coordinator took "
                                   "them in time")
