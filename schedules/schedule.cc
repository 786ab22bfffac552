#include "schedules/schedule.h"

namespace pipecoord::schedules {

bool Schedule::HasCommunication() const {
  for (const auto& actions : ranks) {
    for (const Action& a : actions) {
      if (IsComm(a.op)) return true;
    }
  }
  return false;
}

size_t Schedule::NumActions() const {
  size_t n = 0;
  for (const auto& actions : ranks) n += actions.size();
  return n;
}

std::vector<int> LoopedPlacement(int pp, int vpp) {
  std::vector<int> placement(static_cast<size_t>(pp) * vpp);
  for (size_t k = 0; k < placement.size(); ++k) placement[k] = static_cast<int>(k) % pp;
  return placement;
}

std::vector<int> VPlacement(int pp) {
  std::vector<int> placement(2 * static_cast<size_t>(pp));
  for (int k = 0; k < pp; ++k) {
    placement[k] = k;
    placement[2 * pp - 1 - k] = k;
  }
  return placement;
}

Schedule MakeSchedule(std::string name, int pp, int vpp, int microbatches,
                      std::vector<int> stage_to_rank) {
  Schedule s;
  s.name = std::move(name);
  s.pp = pp;
  s.vpp = vpp;
  s.microbatches = microbatches;
  s.stage_to_rank = std::move(stage_to_rank);
  s.ranks.resize(pp);
  return s;
}

}  // namespace pipecoord::schedules
