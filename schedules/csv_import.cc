// The "csv" generator: a schedule someone wrote (or PyTorch dumped) in PyTorch's CSV format.
// The registry then adds communication when the file has none, and validates either way.
#include <string>

#include "schedules/csv_format.h"
#include "schedules/generator.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateFromCsv(const ScheduleSpec& spec) {
  if (spec.csv.empty()) return InvalidArgument("csv: no CSV text given (the csv schedule reads a file)");
  auto s = ParseScheduleCsv(spec.csv);
  if (!s.ok()) return s.status();
  // pp, vpp and micro-batches come from the file; a value the caller chose (> 1) must agree.
  auto agree = [](const char* field, int given, int found, const char* what) -> Status {
    if (given > 1 && given != found) {
      return InvalidArgument(std::string(field) + ": " + std::to_string(given) + " given, but the CSV has " +
                             std::to_string(found) + " " + what);
    }
    return Status::Ok();
  };
  PIPECOORD_RETURN_IF_ERROR(agree("pp", spec.pp, s->pp, "rows (ranks)"));
  PIPECOORD_RETURN_IF_ERROR(agree("vpp", spec.vpp, s->vpp, "stages per rank"));
  PIPECOORD_RETURN_IF_ERROR(agree("microbatches", spec.microbatches, s->microbatches, "micro-batches"));
  return s;
}

}  // namespace pipecoord::schedules
