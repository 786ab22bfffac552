"""Validation on PyTorch workers (spec.evalEvery), as the C++ worker runs it (worker/daemon/
executor.cc RunValidation, cpu_backend.cc Evaluate):

- when: after step s if (s + 1) % evalEvery == 0 or s is the run's last step (jobplan::
  EvaluatesAfter), once the step's actions, its sends and its memory figures are done, before its
  telemetry goes out (validation's activations are not the step's memory);
- what: evalBatches micro-batches of this replica's validation split (token_data.DatasetBatches.
  validation(replica, k), the C++ JobData::Validation: read in order, the same at every
  evaluation), forward only under torch.no_grad: no graph kept, no weight or gradient touched;
- how: batch after batch, each rank runs the stages it holds in model order; a stage whose
  predecessor is on another rank receives its activations from it (gloo, on tags of their own, so
  they never match a training step's), one on the same rank takes them locally;
- the result: the rank holding the head reports the mean of its batches' losses as the step
  summary's val_loss (has_val_loss); the coordinator averages the replicas' (coordinator/
  step_aggregator.cc), as it does for the C++ workers.
"""
import torch
import torch.distributed as dist

from pipecoord.torch_stages import head_loss

# Validation tags start above every training tag (torch_executor.RankExecutor.tag: < 1024 x
# stages x m) and carry the step modulo VALIDATION_STEPS, so a peer already at the next
# evaluation cannot match this one's.
VALIDATION_STEPS = 4


def evaluates_after(spec, step):
    """jobplan::EvaluatesAfter: whether validation runs after `step` (0-based)."""
    if spec.eval_every <= 0:
        return False
    return (step + 1) % spec.eval_every == 0 or step + 1 == spec.steps


class RankValidation:
    """One rank's validation pass. `executor`: its RankExecutor (the stages, the data, where the
    stages live, its peers and cancellation); `cancelled`: the exception a cancel raises."""

    def __init__(self, executor, cancelled):
        self.x, self.cancelled = executor, cancelled
        spec = executor.a.spec
        self.batches = max(1, spec.eval_batches)
        self.training_tags = 1024 * executor.stages * executor.m

    def tag(self, step, consumer, k):
        x = self.x
        return self.training_tags + ((step % VALIDATION_STEPS) * x.stages + consumer) * self.batches + k

    def run(self, step):
        """The mean validation loss over this replica's batches when this rank holds the head,
        else None. Errors name the batch and the stage."""
        x = self.x
        held = [s for s in range(x.stages) if x.stage_to_rank[s] == x.rank]
        losses, sends = [], []
        with torch.no_grad():
            for k in range(self.batches):
                local = None  # the previous stage's output when that stage is on this rank too
                for s in held:
                    if x.cancelled.is_set():
                        raise self.cancelled()
                    try:
                        out = self._stage(step, s, k, local, losses)
                    except Exception as e:
                        if x.cancelled.is_set():
                            raise self.cancelled() from e
                        raise RuntimeError(f"validation batch {k}, stage {s}: {type(e).__name__}: {e}") from e
                    local = None
                    if s + 1 >= x.stages:
                        continue
                    if x.stage_to_rank[s + 1] == x.rank:
                        local = out
                    else:
                        peer = x.stage_to_rank[s + 1]
                        out = out.contiguous()
                        sends.append((dist.isend(out, dst=x.global_rank(peer), tag=self.tag(step, s + 1, k)), out, peer))
            for work, _, peer in sends:  # received before their buffers go
                x.wait(work, peer)
        return sum(losses) / len(losses) if losses else None

    def _stage(self, step, s, k, local, losses):
        x = self.x
        shard, module = x.runner.shards[s], x.runner.modules[s]
        inp = targets = None
        if shard.has_embedding or shard.has_head:
            tokens, targets = x.data.validation(x.dp_rank, k)
            inp = tokens.to(x.device) if shard.has_embedding else None
            targets = targets.to(x.device) if shard.has_head else None
        if not shard.has_embedding:
            if s > 0 and x.stage_to_rank[s - 1] == x.rank:
                inp = local
            else:
                peer = x.stage_to_rank[s - 1]
                inp = torch.empty(x.boundary, dtype=torch.float32, device=x.device)
                x.wait(dist.irecv(inp, src=x.global_rank(peer), tag=self.tag(step, s, k)), peer)
        out = module(inp)
        if shard.has_head:
            losses.append(float(head_loss(module, out, targets)))
            return None
        return out

