// HttpServer: the coordinator's read-only HTTP side on --http HOST:PORT (civetweb, the server
// prometheus-cpp's exposer is built on):
//   GET /metrics          Prometheus text format (PrometheusMetrics)
//   GET /                 the dashboard page (/dashboard.js, /dashboard.css)
//   GET /api/jobs         {"jobs": [...]}
//   GET /api/workers      {"workers": [...]}
//   GET /api/job?id=JOB   one job's state, timeline, events, memory and straggler scores
// Anything else is 404; methods other than GET and HEAD are 405.
#ifndef PIPECOORD_COORDINATOR_HTTP_HTTP_SERVER_H_
#define PIPECOORD_COORDINATOR_HTTP_HTTP_SERVER_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/coordinator.h"
#include "coordinator/http/prometheus_metrics.h"

struct mg_context;

namespace pipecoord::coordinator::http {

class HttpServer {
 public:
  // Listens on `address` (HOST:PORT; port 0 picks a free one). Neither pointer is owned; both
  // must outlive the server. UNAVAILABLE when the address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& address, Coordinator* core,
                                                   PrometheusMetrics* metrics);
  ~HttpServer();

  int port() const { return port_; }

  // Request handling, public for civetweb's C callbacks.
  struct Response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
  };
  Response Handle(const std::string& method, const std::string& path, const std::string& query) const;

 private:
  HttpServer(Coordinator* core, PrometheusMetrics* metrics) : core_(core), metrics_(metrics) {}

  Coordinator* core_;
  PrometheusMetrics* metrics_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace pipecoord::coordinator::http

#endif  // PIPECOORD_COORDINATOR_HTTP_HTTP_SERVER_H_
