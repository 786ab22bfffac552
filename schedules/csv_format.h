// PyTorch pipelining's CSV schedule format (torch.distributed.pipelining, _dump_csv/_load_csv).
//
// One row per rank, row r is rank r; each cell is one action "<stage><op><micro-batch>", e.g.
// "0F0", "1I3", "2W1", "0SEND_F1"; an empty cell is an idle slot and carries no action. Rows
// and columns are counted from 0 in messages.
//
// Op letters. PyTorch writes "I" for the input-gradient backward (our Op::kB), "B" for the
// FULL backward (our Op::kBW) and "W" for the weight-gradient backward (Op::kW). Export writes
// PyTorch's letters. Import reads PyTorch's letters, our "BW", and our own dialect, where "B"
// is the input-gradient backward ("0F0,1B3,2W1"). The rule that tells them apart, per file:
//   "B" means the input-gradient backward iff the file has W actions and no I actions;
//   otherwise "B" is the full backward.
// SEND_F, RECV_F, SEND_B, RECV_B, PROBE and OPT keep their names (OPT may omit its
// micro-batch: "0OPT"). A SEND/RECV's stage is its own rank's stage, as in PyTorch: SEND_F on
// the producer, RECV_F on the consumer; the peer is not written and import infers it from the
// placement. Cells may be wrapped in double quotes and surrounded by spaces.
//
// PyTorch's newer actions (torch/distributed/pipelining/schedules.py, _ComputationType and
// _Action.__repr__): "1UNSHARD", "1RESHARD" and "1REDUCE_GRAD" name a stage and no micro-batch
// (one written is refused); OVERLAP_F_B is written with its sub-actions,
// "(0F3;1B2)OVERLAP_F_B": a forward, then a backward (I, or B under the rule above), which
// import reads as three actions of the IR (Op::kOverlapFB with the F's stage and micro-batch,
// the F, the backward) and export writes back as one cell. Other sub-action shapes are refused.
#ifndef PIPECOORD_SCHEDULES_CSV_FORMAT_H_
#define PIPECOORD_SCHEDULES_CSV_FORMAT_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

// Every action of every rank in list order, PyTorch's letters, one line per rank ending "\n";
// communication actions too, when the schedule has them (PyTorch's "compute_comms" form).
std::string ScheduleToCsv(const Schedule& schedule);

// Reads the format above into a schedule named "csv": pp = rows, stages = largest stage + 1,
// vpp = stages / pp, micro-batches = largest micro-batch + 1, and the placement from the row
// holding each stage (one rank per stage, every rank the same number of stages). Refuses more
// than 4096 rows, a stage or micro-batch above 1000000, and stages x micro-batches above
// 50000000. Errors are INVALID_ARGUMENT naming the row, the column and the cell text. Checks
// the format only: Validate() judges the schedule.
Result<Schedule> ParseScheduleCsv(std::string_view text);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_CSV_FORMAT_H_
