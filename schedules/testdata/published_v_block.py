#!/usr/bin/env python3
"""Prints the published V-Half / V-Min order (Qi et al.'s zbv_greedy.py) in pipecoord's CSV dialect.

The known answers of schedules/v_block_greedy_test.cc come from this script. It runs the
published code itself, which is not part of this repository: fetch
sail-sg/zero-bubble-pipeline-parallelism (read at 39f2c186) and pass the path of
megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py. Only the standard library.

  python3 published_v_block.py ZBV_GREEDY_PY half|min P M [F B W COMM]

One line per rank, each pass as <stage><F|B|W><micro-batch> (B: input gradient) on the V
placement (stage r and 2p-1-r on rank r). The last line to stderr is their own timing.
"""
import sys
import types

path, kind, p, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
f, b, w, comm = (list(map(float, sys.argv[5:9])) + [1, 1, 1, 0][len(sys.argv[5:9]):])
# Their module imports Megatron's graph types for a step we do not use; load it without them.
source = ''.join(line for line in open(path) if not line.startswith('from megatron'))
module = types.ModuleType('zbv_greedy')
exec(compile(source, path, 'exec'), module.__dict__)
graph = module.PipelineGraph(p, m, kind, f, b, w, comm)
pattern = {'half': graph.stable_pattern_v_half, 'min': graph.stable_pattern_v_min}[kind](p)
costs = [graph.fbw_cost[t // 2] for t in range(6)]
span, _, order = graph.schedule_from_pattern(pattern, m, costs, do_reorder=True)
# Their pass types: 0 F chunk 0, 1 F chunk 1, 2 B chunk 1, 3 B chunk 0, 4 W chunk 1, 5 W chunk 0.
for rank in range(p):
    cells = []
    for t, mb in order[rank]:
        up = t == 1 or t in (2, 4)
        cells.append('%d%s%d' % (2 * p - 1 - rank if up else rank, 'FFBBWW'[t], mb))
    print(','.join(cells))
print(span, file=sys.stderr)
