#include "coordinator/health/probe_check.h"

#include "coordinator/health/event_text.h"
#include "kernels/cpu/known_answer_gemm.h"

namespace pipecoord::coordinator::health {
namespace {
constexpr size_t kStepsKept = 8;
}  // namespace

ProbeCheck::ProbeCheck(uint64_t job_seed, int probe_size, const RankLayout& layout)
    : seed_(job_seed), n_(probe_size), layout_(layout), flagged_(layout.world(), false) {}

uint64_t ProbeCheck::Expected(int step) {
  auto it = expected_.find(step);
  if (it != expected_.end()) return it->second;
  const uint64_t v = kernels::cpu::KnownAnswerChecksum(kernels::cpu::ProbeSeed(seed_, step), n_);
  expected_[step] = v;
  while (expected_.size() > kStepsKept) expected_.erase(expected_.begin());
  return v;
}

std::optional<v1::HealthEvent> ProbeCheck::OnProbe(int g, int step, uint64_t checksum) {
  if (g < 0 || g >= static_cast<int>(flagged_.size())) return std::nullopt;
  ++checked_;
  const uint64_t want = Expected(step);
  reported_[step][g] = checksum;
  while (reported_.size() > kStepsKept) reported_.erase(reported_.begin());
  const bool bad = checksum != want;
  const bool was = flagged_[g];
  flagged_[g] = bad;
  if (!bad || was) return std::nullopt;
  const std::string head =
      Format("sdc: %s step %d: probe checksum 0x%016llx != known answer 0x%016llx (%dx%dx%d GEMM); ", layout_.Name(g).c_str(),
             step, static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(want), n_, n_, n_);
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

}  // namespace pipecoord::coordinator::health
