// The dashboard's static files, served by the coordinator's HTTP server: a page, its script and
// its style sheet. The script fetches /api/jobs, /api/workers and /api/job?id=JOB every second
// (the job's less often once its JSON, which holds every step record, passes 2 MB)
// and only ever sets text (no innerHTML), so nothing a job or worker reports can become markup.
// It draws the selected job's curves itself as inline SVG (no external script): loss, step time
// and bubble rate measured and predicted, idle time by cause, peak memory per rank against its
// budget; each line carries data-series, data-points (its point count) and data-last.
#ifndef PIPECOORD_COORDINATOR_HTTP_DASHBOARD_PAGE_H_
#define PIPECOORD_COORDINATOR_HTTP_DASHBOARD_PAGE_H_

namespace pipecoord::coordinator::http {

extern const char kDashboardHtml[];
extern const char kDashboardJs[];
extern const char kDashboardCss[];

}  // namespace pipecoord::coordinator::http

#endif  // PIPECOORD_COORDINATOR_HTTP_DASHBOARD_PAGE_H_
