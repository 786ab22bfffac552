// The JSON the dashboard page fetches: job and worker listings, and one job's detail (state,
// the last steps' measured actions per rank with the plan's predicted idle windows placed on
// the same clock, health events, memory per rank against its budget, straggler scores, and the
// curves: every step record's loss, step time and bubble rate measured and predicted, idle
// seconds by cause, each global rank's peak beside its budget; the calibration and the
// rebalance proposal, null until the coordinator has them). Written
// with the one JSON writer (common/json_writer.h), compact, with JsonEscape::kHtmlSafe: control
// characters, quotes, backslashes, '<', '>', '&', U+2028/9 and ill-formed UTF-8 are escaped,
// so the text is inert inside HTML too; the page only ever sets text, never HTML. Numbers are
// the writer's shortest round-trip form (null when not finite).
#ifndef PIPECOORD_COORDINATOR_HTTP_DASHBOARD_JSON_H_
#define PIPECOORD_COORDINATOR_HTTP_DASHBOARD_JSON_H_

#include <string>
#include <string_view>
#include <vector>

#include "coordinator/health/job_monitor.h"
#include "proto/job.pb.h"

namespace pipecoord::coordinator::http {

// {"error":"<message>"}: what /api/job answers for an unknown job.
std::string ErrorJson(std::string_view message);

std::string JobsJson(const std::vector<v1::Job>& jobs);
std::string WorkersJson(const std::vector<v1::WorkerInfo>& workers);
// `job` as GetJob returns it (plan included).
std::string JobDetailJson(const v1::Job& job, const health::HealthSnapshot& health);

}  // namespace pipecoord::coordinator::http

#endif  // PIPECOORD_COORDINATOR_HTTP_DASHBOARD_JSON_H_
