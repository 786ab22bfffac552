// Fuzz target: a schedule in PyTorch's CSV format, as `pipectl schedule --schedule csv` and a
// JobSpec's csv_schedule import it: parse, build (communication pass and validator), simulate,
// and export back. What the validator accepts must simulate, and its CSV must read back to the
// same schedule.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "schedules/csv_format.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"

using namespace pipecoord::schedules;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64 << 10)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseScheduleCsv(text);
  if (!parsed.ok()) return 0;
  ScheduleSpec spec;
  spec.csv = text;
  auto built = BuildSchedule("csv", spec);
  if (!built.ok()) return 0;
  auto sim = Simulate(*built, spec.costs);
  FUZZ_CHECK(sim.ok(), "a validated schedule does not simulate: %s", sim.status().message().c_str());
  FUZZ_CHECK(sim->bubble_rate >= -1e-9 && sim->bubble_rate <= 1 + 1e-9, "bubble rate %g", sim->bubble_rate);
  const std::string csv = ScheduleToCsv(*built);
  auto again = ParseScheduleCsv(csv);
  FUZZ_CHECK(again.ok(), "its own CSV does not read back: %s", again.status().message().c_str());
  FUZZ_CHECK(again->pp == built->pp && again->ranks == built->ranks && again->stage_to_rank == built->stage_to_rank,
             "the CSV round trip changed the schedule");
  return 0;
}
