// A text picture of a simulated schedule for terminals: one row per rank, time to the right.
//
//   1f1b  p=2 v=1 m=3  makespan 9 time units  bubble rate 16.7%  (1 column = 1 time unit)
//   time     0   1   2   3   4   5   6   7   8
//   rank 0   F0  F1  .   BW0 --- F2  BW1 --- ...
//
// Each column is a fixed-width slot of the smallest compute cost in the schedule (at most
// 2000 columns: longer schedules get coarser columns). An action fills the columns its
// simulated time covers: its label in the first ("F0", "B3", "W1", "BW2"; with v > 1 chunks
// per rank the label ends in ".c", the rank's chunk c counted in model order, e.g. "F3.1"),
// "-" in the rest; "." marks idle columns. Only compute actions are drawn (communication takes
// no time, and actions shorter than a billionth of the makespan are left out). When costs are not multiples of the column width, actions snap to the nearest
// column edge, so the picture is approximate; the numbers in the header are exact.
#ifndef PIPECOORD_SCHEDULES_TEXT_GRID_H_
#define PIPECOORD_SCHEDULES_TEXT_GRID_H_

#include <string>

#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {

// The grid above: a header line, a time ruler (column index), one line per rank and a legend,
// each ending in a newline. `sim` must come from Simulate(schedule, ...).
std::string ScheduleToTextGrid(const Schedule& schedule, const Simulation& sim);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_TEXT_GRID_H_
