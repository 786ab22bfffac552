"""python/pipecoord/token_data.py against the C++ data code, whose answers sampler_dump prints.

compare.py range DUMP_JSON ARGS...   the sampler over a token range (the sampler_dump range flags)
compare.py job DUMP_JSON ARGS...     a job's spec.data read as a worker reads it (sampler_dump job),
                                     its validation batches too with --eval-batches
Exits non-zero, naming the first difference.
"""
import json
import sys

from pipecoord import token_data
from proto import job_pb2


def flags(args):
    out = {}
    for i in range(0, len(args), 2):
        out[args[i].lstrip("-")] = args[i + 1]
    return out


def check_header(sampler, want):
    got = {"windows": sampler.windows, "per_step": sampler.per_step, "steps_per_epoch": sampler.steps_per_epoch}
    for k, v in got.items():
        assert v == want[k], f"{k}: python {v}, C++ {want[k]}"


def main():
    mode, dump, f = sys.argv[1], json.load(open(sys.argv[2])), flags(sys.argv[3:])
    seq, b, m, dp = int(f["seq"]), int(f["batch"]), int(f["microbatches"]), int(f.get("dp", 1))
    if mode == "range":
        order = token_data.SequenceSampler.SHUFFLED if f.get("order", "shuffled") == "shuffled" \
            else token_data.SequenceSampler.SEQUENTIAL
        sampler = token_data.SequenceSampler((int(f.get("begin", 0)), int(f["end"])), int(f.get("seed", 0)),
                                             seq, b, m, dp, order)
        check_header(sampler, dump)
        for step, replica, mb, starts in dump["starts"]:
            got = sampler.microbatch_starts(step, replica, mb)
            assert got == starts, f"step {step} replica {replica} mb {mb}: python {got}, C++ {starts}"
        print(f"range {f.get('begin', 0)}..{f['end']} seed {f.get('seed', 0)} s {seq} G {sampler.per_step} "
              f"W {sampler.windows} E {sampler.steps_per_epoch}: {len(dump['starts'])} micro-batches equal")
        return
    spec = job_pb2.JobSpec()
    spec.data.path = f["data"]
    spec.data.val_fraction = float(f.get("val-fraction", 0))
    spec.data.val_path = f.get("val-path", "")
    if int(f.get("eval-batches", 0)) > 0:  # validation is read only with spec.evalEvery
        spec.eval_every, spec.eval_batches = 1, int(f["eval-batches"])
    spec.model.vocab, spec.model.seq_len = int(f["vocab"]), seq
    spec.model.seed = spec.data_seed = int(f["seed"])  # data_seed 0 means model.seed: the same
    spec.micro_batch_size, spec.microbatches, spec.dp = b, m, dp
    data = token_data.training_data(spec)
    check_header(data.sampler, dump)
    for step, replica, mb, starts, inputs, targets in dump["batches"]:
        assert data.sampler.microbatch_starts(step, replica, mb) == starts, (step, replica, mb)
        x, y = data.batch(step, replica * m + mb)
        assert x.shape == (b, seq) and y.shape == (b, seq), (x.shape, y.shape)
        assert x.flatten().tolist() == inputs, f"step {step} replica {replica} mb {mb}: inputs differ"
        assert y.flatten().tolist() == targets, f"step {step} replica {replica} mb {mb}: targets differ"
    validation = dump.get("validation", [])
    assert len(validation) == (dp * spec.eval_batches if spec.eval_every else 0), len(validation)
    for replica, k, inputs, targets in validation:
        x, y = data.validation(replica, k)
        assert x.shape == (b, seq) and y.shape == (b, seq), (x.shape, y.shape)
        assert x.flatten().tolist() == inputs, f"validation replica {replica} batch {k}: inputs differ"
        assert y.flatten().tolist() == targets, f"validation replica {replica} batch {k}: targets differ"
    print(f"job {f['data']} valFraction {f.get('val-fraction', 0)}: {len(dump['batches'])} micro-batches' windows "
          f"and tokens equal" + (f"; {len(validation)} validation batches' tokens equal" if validation else ""))


if __name__ == "__main__":
    main()
