#include "coordinator/http/http_server.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>

#include "coordinator/http/dashboard_json.h"
#include "coordinator/http/dashboard_page.h"

namespace pipecoord::coordinator::http {
namespace {

int OnRequest(mg_connection* conn, void* data) {
  const HttpServer* server = static_cast<const HttpServer*>(data);
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string method = info->request_method ? info->request_method : "";
  const std::string path = info->local_uri ? info->local_uri : "/";
  const std::string query = info->query_string ? info->query_string : "";
  const HttpServer::Response r = server->Handle(method, path, query);
  const char* reason = r.status == 200 ? "OK" : r.status == 404 ? "Not Found" : r.status == 405 ? "Method Not Allowed"
                                                                              : "Error";
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
            "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
            "Content-Security-Policy: default-src 'self'; object-src 'none'; base-uri 'none'\r\n"
            "Connection: close\r\n\r\n",
            r.status, reason, r.content_type.c_str(), r.body.size());
  if (method != "HEAD") mg_write(conn, r.body.data(), r.body.size());
  return r.status;
}

std::string QueryVar(const std::string& query, const char* name) {
  char buf[256];
  const int n = mg_get_var(query.data(), query.size(), name, buf, sizeof buf);
  return n >= 0 ? std::string(buf, n) : "";
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address, Coordinator* core,
                                                      PrometheusMetrics* metrics) {
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return InvalidArgument("--http: must be HOST:PORT, got \"" + address + "\"");
  std::unique_ptr<HttpServer> s(new HttpServer(core, metrics));
  const char* options[] = {"listening_ports", address.c_str(), "num_threads", "4", "request_timeout_ms", "10000",
                           nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof callbacks);
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };  // quiet
  s->ctx_ = mg_start(&callbacks, nullptr, options);
  if (s->ctx_ == nullptr) return Unavailable("--http: cannot listen on " + address);
  mg_set_request_handler(s->ctx_, "/", OnRequest, s.get());
  mg_server_port ports[4];
  const int n = mg_get_server_ports(s->ctx_, 4, ports);
  if (n < 1) return Unavailable("--http: no port bound for " + address);
  s->port_ = ports[0].port;
  return s;
}

HttpServer::~HttpServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

HttpServer::Response HttpServer::Handle(const std::string& method, const std::string& path,
                                        const std::string& query) const {
  Response r;
  if (method != "GET" && method != "HEAD") {
    r.status = 405;
    r.body = "only GET and HEAD\n";
    return r;
  }
  if (path == "/metrics") {
    metrics_->UpdateFleet(core_->ListJobs(), core_->ListWorkers());
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_->Serialize();
  } else if (path == "/" || path == "/index.html") {
    r.content_type = "text/html; charset=utf-8";
    r.body = kDashboardHtml;
  } else if (path == "/dashboard.js") {
    r.content_type = "text/javascript; charset=utf-8";
    r.body = kDashboardJs;
  } else if (path == "/dashboard.css") {
    r.content_type = "text/css; charset=utf-8";
    r.body = kDashboardCss;
  } else if (path == "/api/jobs") {
    r.content_type = "application/json";
    r.body = JobsJson(core_->ListJobs());
  } else if (path == "/api/workers") {
    r.content_type = "application/json";
    r.body = WorkersJson(core_->ListWorkers());
  } else if (path == "/api/job") {
    r.content_type = "application/json";
    const std::string id = QueryVar(query, "id");
    auto job = core_->GetJob(id);
    auto health = core_->JobHealth(id);
    if (!job.ok() || !health.ok()) {
      r.status = 404;
      r.body = ErrorJson(job.ok() ? health.status().message() : job.status().message());
    } else {
      r.body = JobDetailJson(*job, *health);
    }
  } else {
    r.status = 404;
    r.body = "not found\n";
  }
  return r;
}

}  // namespace pipecoord::coordinator::http
