// Fuzz target: an op program in JSON, as `pipectl memory --program FILE` reads it, replayed by
// the liveness simulator and reported. What parses must write back to JSON that parses to the
// same document and replays to the same peak; byte counts are never negative.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "memory/liveness.h"
#include "memory/liveness_report.h"
#include "memory/program_json.h"

using namespace pipecoord::memory;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64 << 10)) return 0;
  auto set = ParseProgramJson(std::string(reinterpret_cast<const char*>(data), size));
  if (!set.ok()) return 0;
  const std::string json = ProgramSetToJson(*set);
  auto again = ParseProgramJson(json);
  FUZZ_CHECK(again.ok(), "its own JSON does not read back: %s", again.status().message().c_str());
  FUZZ_CHECK(ProgramSetToJson(*again) == json, "the JSON round trip changed the program");
  auto live = SimulateLiveness(*set);
  if (!live.ok()) return 0;
  FUZZ_CHECK(live->peak_bytes >= 0 && live->persistable_bytes >= 0 && live->input_bytes >= 0,
             "negative bytes: peak %lld", static_cast<long long>(live->peak_bytes));
  for (const OpLiveness& op : live->ops) {
    FUZZ_CHECK(op.before >= 0 && op.during >= op.before && op.after >= 0 && op.during <= live->peak_bytes,
               "op %s: before %lld during %lld after %lld", op.name.c_str(), static_cast<long long>(op.before),
               static_cast<long long>(op.during), static_cast<long long>(op.after));
  }
  auto replay = SimulateLiveness(*again);
  FUZZ_CHECK(replay.ok() && replay->peak_bytes == live->peak_bytes, "the round trip changed the peak");
  (void)LivenessText(*live);
  (void)LivenessJson(*live);
  return 0;
}
