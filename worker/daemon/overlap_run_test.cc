// PyTorch's OVERLAP_F_B (DualPipe's overlapped forward and backward, from an imported CSV): the
// workers run the slot's F and backward one after the other, as PyTorch's runtime does without a
// custom overlap function. A schedule whose adjacent forward/backward pairs are wrapped in
// OVERLAP_F_B slots trains bit for bit as the same schedule unwrapped: the same losses and the
// same final weights and AdamW moments on every rank, and each slot is reported once.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "jobplan/spec_validation.h"
#include "schedules/csv_format.h"
#include "schedules/registry.h"
#include "worker/daemon/local_run.h"

namespace pipecoord::worker {
namespace {

v1::JobSpec CsvJob(const std::string& csv, int pp, int vpp, int microbatches) {
  v1::JobSpec s;
  s.set_name("overlap");
  s.set_schedule("csv");
  s.set_csv_schedule(csv);
  s.set_pp(pp);
  s.set_vpp(vpp);
  s.set_microbatches(microbatches);
  s.set_micro_batch_size(2);
  s.set_steps(3);
  s.set_learning_rate(0.01);
  auto* m = s.mutable_model();
  m->set_layers(2 * pp * vpp);
  m->set_hidden(16);
  m->set_heads(2);
  m->set_vocab(32);
  m->set_seq_len(8);
  m->set_seed(5);
  return s;
}

std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> out;
  std::stringstream in(row);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
  return out;
}

bool IsForward(const std::string& c) { return std::regex_match(c, std::regex("[0-9]+F[0-9]+")); }
bool IsBackward(const std::string& c) { return std::regex_match(c, std::regex("[0-9]+[IB][0-9]+")); }

// "3F7" -> "3 7", "0I5" -> "0 5".
std::string StageAndMicroBatch(const std::string& c) {
  std::smatch m;
  std::regex_match(c, m, std::regex("([0-9]+)[A-Z]+([0-9]+)"));
  return m[1].str() + " " + m[2].str();
}

// Every adjacent (forward, backward) pair of a compute-only CSV wrapped into one slot; *slots
// counts them.
std::string WrapOverlaps(const std::string& csv, int* slots) {
  std::stringstream in(csv), out;
  for (std::string row; std::getline(in, row);) {
    const std::vector<std::string> cells = Cells(row);
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      std::string cell = cells[i];
      // Not a micro-batch's own backward: the two halves of a slot run at once.
      if (i + 1 < cells.size() && IsForward(cells[i]) && IsBackward(cells[i + 1]) &&
          StageAndMicroBatch(cells[i]) != StageAndMicroBatch(cells[i + 1])) {
        cell = "(" + cells[i] + ";" + cells[i + 1] + ")OVERLAP_F_B";
        ++i;
        ++*slots;
      }
      line += (line.empty() ? "" : ",") + cell;
    }
    out << line << "\n";
  }
  return out.str();
}

LocalRunResult MustRun(const v1::JobSpec& spec) {
  EXPECT_TRUE(jobplan::ValidateJobSpec(spec).ok()) << jobplan::ValidateJobSpec(spec).ToString();
  auto run = RunLocally(spec, {}, {}, /*keep_final_state=*/true);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? std::move(run).value() : LocalRunResult{};
}

TEST(OverlapRunTest, SlotsTrainBitForBitAsTheirHalves) {
  for (const char* name : {"dualpipev", "zbv"}) {
    schedules::ScheduleSpec ss;
    ss.pp = 2;
    ss.microbatches = 8;
    ss.vpp = (*schedules::FindSchedule(name))->default_vpp;
    auto s = schedules::BuildSchedule(name, ss);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const std::string plain = schedules::ScheduleToCsv(*s);
    int slots = 0;
    const std::string wrapped = WrapOverlaps(plain, &slots);
    ASSERT_GT(slots, 0) << name << ":\n" << plain;
    const LocalRunResult a = MustRun(CsvJob(plain, 2, s->vpp, 8));
    const LocalRunResult b = MustRun(CsvJob(wrapped, 2, s->vpp, 8));
    ASSERT_EQ(StepLosses(a).size(), 3u) << name;
    EXPECT_EQ(StepLosses(a), StepLosses(b)) << name;
    ASSERT_EQ(a.final_state.size(), b.final_state.size());
    for (size_t g = 0; g < a.final_state.size(); ++g) EXPECT_EQ(a.final_state[g], b.final_state[g]) << name << " rank " << g;
    int reported = 0;
    for (const auto& rank : b.reports) {
      for (const StepReport& step : rank) {
        for (const v1::ActionTiming& t : step.actions) reported += t.action().op() == v1::OVERLAP_F_B;
      }
    }
    EXPECT_EQ(reported, slots * 3) << name;  // every slot, every step
    std::printf("%s pp 2: %d OVERLAP_F_B slots; losses and final state equal to the unwrapped schedule's\n", name, slots);
  }
}

}  // namespace
}  // namespace pipecoord::worker
