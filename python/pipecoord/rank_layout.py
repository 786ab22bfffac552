"""A job's pipeline x data x tensor rank grid, as a value: the twin of common/rank_layout.h.

Global ranks put tp innermost (a tensor-parallel group's ranks are neighbours), then pp, then dp:

    global = (dp_rank * pp + pp_rank) * tp + tp_rank

so with tp = 1 it is pipecoord's dp_rank * pp + rank. Groups list their members in their own
coordinate's order. tests/rank_layout/rank_layout_test checks every answer against the C++ class.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class RankCoords:
    pp: int = 0  # pipeline rank (the schedule's rank)
    dp: int = 0  # data-parallel replica
    tp: int = 0  # tensor-parallel shard


@dataclass(frozen=True)
class RankLayout:
    pp: int = 1
    dp: int = 1
    tp: int = 1

    def __post_init__(self):
        for name in ("pp", "dp", "tp"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be >= 1, got {v!r}")

    @classmethod
    def of_spec(cls, spec):
        """From a JobSpec (proto or anything with pp, dp, tp): a degree of 0 means 1."""
        return cls(max(1, spec.pp), max(1, spec.dp), max(1, getattr(spec, "tp", 0)))

    @property
    def world(self):
        return self.pp * self.dp * self.tp

    def contains(self, g):
        return 0 <= g < self.world

    def global_rank(self, c):
        return (c.dp * self.pp + c.pp) * self.tp + c.tp

    def coords(self, g):
        return RankCoords(self.pipeline_rank(g), self.data_rank(g), self.tensor_rank(g))

    def pipeline_rank(self, g):
        return (g // self.tp) % self.pp

    def data_rank(self, g):
        return g // (self.tp * self.pp)

    def tensor_rank(self, g):
        return g % self.tp

    def at_pipeline_rank(self, g, pp_rank):
        c = self.coords(g)
        return self.global_rank(RankCoords(pp_rank, c.dp, c.tp))

    def at_data_rank(self, g, dp_rank):
        c = self.coords(g)
        return self.global_rank(RankCoords(c.pp, dp_rank, c.tp))

    def tensor_group(self, g):
        first = g - self.tensor_rank(g)
        return list(range(first, first + self.tp))

    def data_group(self, g):
        return [self.at_data_rank(g, d) for d in range(self.dp)]

    def pipeline_group(self, g):
        return [self.at_pipeline_rank(g, p) for p in range(self.pp)]

    def name(self, g):
        """ "rank 1 (dp 0)", with ", tp 1" when tp > 1; "the job" for g < 0."""
        if g < 0:
            return "the job"
        c = self.coords(g)
        return f"rank {c.pp} (dp {c.dp}" + (f", tp {c.tp}" if self.tp > 1 else "") + ")"
