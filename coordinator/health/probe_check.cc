#include "coordinator/health/probe_check.h"

#include "coordinator/health/event_text.h"
#include "kernels/cpu/known_answer_gemm.h"

namespace pipecoord::coordinator::health {
namespace {
constexpr size_t kStepsKept = 8;
}  // namespace

ProbeCheck::ProbeCheck(uint64_t job_seed, std::vector<kernels::cpu::ProbeShape> shapes, const RankLayout& layout)
    : seed_(job_seed), shapes_(std::move(shapes)), layout_(layout),
      flagged_(layout.world(), false),
      replay_flagged_(layout.world(), false),
      seeded_flagged_(layout.world(), false) {
  if (shapes_.empty()) shapes_.push_back({kernels::cpu::kDefaultProbeSize, kernels::cpu::kDefaultProbeSize,
                                          kernels::cpu::kDefaultProbeSize});
}

const kernels::cpu::ProbeShape& ProbeCheck::ShapeOf(int rank) const {
  return shapes_.size() == 1 || rank < 0 || rank >= static_cast<int>(shapes_.size()) ? shapes_[0] : shapes_[rank];
}

uint64_t ProbeCheck::Expected(int step, int rank) {
  const kernels::cpu::ProbeShape& s = ShapeOf(rank);
  auto& at_step = expected_[step];
  const auto key = std::make_tuple(s.m, s.k, s.n);
  auto it = at_step.find(key);
  if (it != at_step.end()) return it->second;
  // A shape the kernels refuse (too large to draw) has no answer a worker could match: 0.
  const uint64_t v = kernels::cpu::ValidProbeShape(s) ? kernels::cpu::KnownAnswerChecksum(kernels::cpu::ProbeSeed(seed_, step), s) : 0;
  at_step[key] = v;
  while (expected_.size() > kStepsKept) expected_.erase(expected_.begin());
  return v;
}

std::optional<v1::HealthEvent> ProbeCheck::OnProbe(int g, int step, uint64_t checksum) {
  if (g < 0 || g >= static_cast<int>(flagged_.size())) return std::nullopt;
  ++checked_;
  const int rank = layout_.PipelineRank(g);
  const uint64_t want = Expected(step, rank);
  reported_[step][g] = checksum;
  while (reported_.size() > kStepsKept) reported_.erase(reported_.begin());
  const bool bad = checksum != want;
  const bool was = flagged_[g];
  flagged_[g] = bad;
  if (!bad || was) return std::nullopt;
  const std::string head =
      Format("sdc: %s step %d: probe checksum 0x%016llx != known answer 0x%016llx (%s); ", layout_.Name(g).c_str(),
             step, static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(want),
             ShapeOf(rank).ToString().c_str());
  if (layout_.dp() == 1) {
    // dp 1: the rank has no replica, the known answer is all there is to compare with.
    return MakeEvent(v1::SDC, g, layout_, step,
                     head + Format("compared with the known answer only: the job has one replica (dp 1), none to "
                                   "compare rank %d with",
                                   layout_.PipelineRank(g)));
  }
  std::string replicas;
  for (const auto& [other, sum] : reported_[step]) {
    if (other == g || layout_.AtDataRank(other, layout_.DataRank(g)) != g) continue;  // not a replica of g
    replicas += Format("%sdp %d 0x%016llx (%s)", replicas.empty() ? "" : ", ", layout_.DataRank(other),
                       static_cast<unsigned long long>(sum), sum == want ? "agrees" : "differs");
  }
  if (replicas.empty()) replicas = "none reported yet";
  return MakeEvent(v1::SDC, g, layout_, step, head + Format("replicas of rank %d: %s", layout_.PipelineRank(g), replicas.c_str()));
}

std::vector<v1::HealthEvent> ProbeCheck::OnReplay(int g, int step, const v1::ProbeReplay& r) {
  if (g < 0 || g >= static_cast<int>(replay_flagged_.size())) return {};
  ++replays_checked_;
  if (r.seeded()) return OnSeeded(g, step, r);
  const bool bad = r.replay_checksum() != r.original_checksum();
  const bool was = replay_flagged_[g];
  replay_flagged_[g] = bad;
  if (!bad || was) return {};
  return {MakeEvent(v1::SDC, g, layout_, step,
                    Format("sdc: %s step %d: replay of F stage %d micro-batch %d gave 0x%016llx where its run in "
                           "the step gave 0x%016llx: the same input and weights through deterministic kernels, so "
                           "one of the two runs computed wrongly (a transient fault, or a unit that fails now and then)",
                           layout_.Name(g).c_str(), step, r.stage(), r.microbatch(),
                           static_cast<unsigned long long>(r.replay_checksum()),
                           static_cast<unsigned long long>(r.original_checksum())))};
}

std::vector<v1::HealthEvent> ProbeCheck::OnSeeded(int g, int step, const v1::ProbeReplay& r) {
  auto& at = seeded_[step];
  at[g] = r.replay_checksum();
  while (seeded_.size() > kStepsKept) seeded_.erase(seeded_.begin());
  if (!seeded_.count(step)) return {};
  std::vector<int> replicas;  // g's position in every replica
  for (int d = 0; d < layout_.dp(); ++d) replicas.push_back(layout_.AtDataRank(g, d));
  std::map<uint64_t, int> votes;
  for (int other : replicas) {
    auto it = at.find(other);
    if (it == at.end()) return {};  // not all reported yet
    ++votes[it->second];
  }
  uint64_t majority = 0;
  int most = 0;
  for (const auto& [sum, n] : votes) {
    if (n > most) {
      most = n;
      majority = sum;
    }
  }
  const bool has_majority = 2 * most > static_cast<int>(replicas.size());
  std::string all;
  for (int other : replicas) {
    all += Format("%sdp %d 0x%016llx", all.empty() ? "" : ", ", layout_.DataRank(other),
                  static_cast<unsigned long long>(at[other]));
  }
  std::vector<v1::HealthEvent> out;
  for (int other : replicas) {
    const bool bad = votes.size() > 1 && (!has_majority || at[other] != majority);
    const bool was = seeded_flagged_[other];
    seeded_flagged_[other] = bad;
    if (!bad || was) continue;
    out.push_back(MakeEvent(
        v1::SDC, other, layout_, step,
        Format("sdc: %s step %d: the seeded forward of stage %d gave 0x%016llx, %s: the replicas run it on the same "
               "input and weights (%s)",
               layout_.Name(other).c_str(), step, r.stage(), static_cast<unsigned long long>(at[other]),
               has_majority ? "where the other replicas agree on another answer" : "and no answer has a majority (either may be wrong)",
               all.c_str())));
  }
  return out;
}

}  // namespace pipecoord::coordinator::health
