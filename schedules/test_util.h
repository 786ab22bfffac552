// Helpers for schedule tests: compact text forms that make exact orders easy to assert.
#ifndef PIPECOORD_SCHEDULES_TEST_UTIL_H_
#define PIPECOORD_SCHEDULES_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/registry.h"
#include "schedules/schedule.h"
#include "schedules/simulator.h"
#include "schedules/validator.h"

namespace pipecoord::schedules::testing {

// "0F0 0F1 0BW0 ..." with the peer appended to communication actions ("0SEND_F0>1").
inline std::string RankText(const std::vector<Action>& list) {
  std::string out;
  for (const Action& a : list) {
    if (!out.empty()) out += ' ';
    out += ToString(a);
    if (IsComm(a.op)) out += (IsSend(a.op) ? ">" : "<") + std::to_string(a.peer);
  }
  return out;
}

inline Schedule MustGenerate(const std::string& name, const ScheduleSpec& spec) {
  auto s = GenerateComputeOrder(name, spec);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : Schedule{};
}

inline Simulation MustSimulate(const Schedule& s, const CostModel& c) {
  auto sim = Simulate(s, c);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  return sim.ok() ? *sim : Simulation{};
}

inline ScheduleSpec Spec(int pp, int m, int vpp = 0) {
  ScheduleSpec spec;
  spec.pp = pp;
  spec.microbatches = m;
  spec.vpp = vpp;
  return spec;
}

}  // namespace pipecoord::schedules::testing

#endif  // PIPECOORD_SCHEDULES_TEST_UTIL_H_
