"""python/pipecoord/rank_layout.py against common/rank_layout.h (rank_layout_dump's lines on stdin):
the same coordinates, groups and names for every global rank, and the same refusals."""
import json
import sys

from pipecoord.rank_layout import RankCoords, RankLayout

lines = [json.loads(l) for l in sys.stdin if l.strip()]
checked = refused = 0
for d in lines:
    pp, dp, tp = d["layout"]
    if "error" in d:
        try:
            RankLayout(pp, dp, tp)
        except ValueError as e:
            assert str(e).split(",")[0] == d["error"].split(",")[0], (e, d)
            refused += 1
            continue
        raise AssertionError(f"python accepted {d['layout']}, C++ refused: {d['error']}")
    layout = RankLayout(pp, dp, tp)
    g = d["g"]
    c = layout.coords(g)
    assert [c.pp, c.dp, c.tp] == d["coords"], d
    assert layout.global_rank(RankCoords(*d["coords"])) == g, d
    assert layout.tensor_group(g) == d["tensor"], d
    assert layout.data_group(g) == d["data"], d
    assert layout.pipeline_group(g) == d["pipeline"], d
    assert layout.name(g) == d["name"], d
    checked += 1
worlds = {tuple(d["layout"]) for d in lines if "error" not in d}
for pp, dp, tp in worlds:
    assert sum(1 for d in lines if tuple(d["layout"]) == (pp, dp, tp) and "g" in d) == RankLayout(pp, dp, tp).world
print(f"rank_layout.py agrees with common/rank_layout.h on {checked} ranks of {len(worlds)} layouts, "
      f"and refuses the {refused} bad ones")
assert checked > 0 and refused > 0
