// coordinator: pipecoord's control-plane server.
//   coordinator --listen 127.0.0.1:50051
#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <climits>
#include <csignal>
#include <cstdio>
#include <thread>

#include "common/flags.h"
#include "common/process_holders.h"
#include "coordinator/coordinator.h"
#include "coordinator/ha/candidate.h"
#include "coordinator/ha/etcd_state_store.h"
#include "coordinator/health_port.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/prometheus_metrics.h"
#include "coordinator/server_security.h"
#include "coordinator/service.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
// The grpc.health.v1 service name that is SERVING only on the coordinator that serves (the
// elected one, with --etcd): readiness probes ask for it.
constexpr const char* kActiveService = "pipecoord.active";
}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil (gRPC's mutexes) is built with deadlock detection on: every lock walks a
  // graph of every mutex alive (a set per connection), and with 16,384 connections the fleet
  // bench's client spent 29% of its CPU in it (GraphCycles::GetId). Off: it only ever reports.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  using namespace pipecoord;
  std::string listen = "127.0.0.1:50051", http, state, etcd, ha_name = "default", advertise;
  int ha_lease_s = 5;
  int keepalive_ms = 10000;
  int max_heartbeats_per_s = 2000;
  int lease_ms = 5000, max_jobs = 10000, trace_actions = 200000, adopt_grace_ms = 60000, metrics_retention_s = 3600;
  FlagSet flags("coordinator [--listen HOST:PORT] [--http HOST:PORT] [--lease-ms N] [--max-heartbeats-per-s N] [--adopt-grace-ms N] [--max-jobs N] [--trace-actions N] [--tls-cert FILE --tls-key FILE "
                     "--tls-ca FILE --token-file FILE] [--health-listen HOST:PORT] [--etcd HOST:PORT,... [--ha-name NAME] "
                     "[--ha-lease-s N] [--advertise HOST:PORT]]",
                     "pipecoord's coordinator: plans jobs, hands workers their job lists over gRPC and "
                     "collects their telemetry. Serves grpc.health.v1 and server reflection.");
  flags.String("listen", &listen, "gRPC address to serve (default 127.0.0.1:50051; port 0 picks one)");
  flags.String("http", &http, "HTTP address for /metrics and the dashboard page (port 0 picks one; default: none)");
  flags.String("state", &state, "SQLite state file (WAL mode) keeping jobs, events, steps and telemetry across "
                                 "restarts; created if missing (default: state in memory only)");
  // High availability (docs/operations.md "High availability"): state in etcd, one coordinator
  // elected active, the others standing by.
  flags.String("etcd", &etcd,
               "etcd client endpoints HOST:PORT[,HOST:PORT...]: keep the state in etcd instead of --state and "
               "serve only while elected there; the others standing by take over when the active one goes "
               "(default: none, a single coordinator)");
  flags.String("ha-name", &ha_name,
               "with --etcd: the coordinators that share state and elect one active (keys under "
               "/pipecoord/NAME/; default \"default\")");
  flags.Int("ha-lease-s", &ha_lease_s,
            "with --etcd: seconds an active coordinator may go unheard by etcd before a standby takes over "
            "(default 5)");
  flags.String("advertise", &advertise,
               "with --etcd: the address standbys and tools are told the active coordinator serves at "
               "(default: --listen)");
  flags.Int("lease-ms", &lease_ms, "a worker silent this long is considered gone, in ms (default 5000)");
  flags.Int("max-heartbeats-per-s", &max_heartbeats_per_s,
            "the lease grows with the fleet so that heartbeats (each worker's every lease / 3) stay under this "
            "rate: lease = max(--lease-ms, 3 s x workers / N); 0: the lease stays --lease-ms (default 2000)");
  flags.Int("keepalive-ms", &keepalive_ms,
            "how often the server pings each client connection to find vanished hosts, in ms (default 10000; "
            "0: never; each ping also runs a timer per connection)");
  flags.Int("adopt-grace-ms", &adopt_grace_ms,
            "after a restart on --state, how long a job that was running waits for its workers to come back "
            "holding it, in ms (default 60000); a rank still missing then fails the attempt");
  flags.Int("metrics-retention-s", &metrics_retention_s,
            "how long a finished job's series stay on /metrics after it ended, in seconds (default 3600); its "
            "history stays in the state file and pipectl status");
  flags.Int("max-jobs", &max_jobs,
            "jobs kept, finished ones included (default 10000); a new job drops the oldest finished one, "
            "with its events, steps and telemetry");
  flags.Int("trace-actions", &trace_actions,
            "measured actions kept per job (memory and state file) for `pipectl trace` and for rebuilding its "
            "Prometheus series after a restart (default 200000); older ones are dropped");
  // Security (coordinator/server_security.h, docs/operations.md "Security"): all four or none.
  coordinator::ServerSecurityFlags security_flags;
  std::string health_listen;
  flags.String("tls-cert", &security_flags.tls_cert, "PEM certificate (chain) the gRPC port serves TLS with");
  flags.String("tls-key", &security_flags.tls_key, "PEM private key of --tls-cert");
  flags.String("tls-ca", &security_flags.tls_ca,
               "PEM CA that signs workers' client certificates; a worker's id is its certificate's URI SAN "
               "urn:pipecoord:worker:ID");
  flags.String("token-file", &security_flags.token_file,
               "file holding the bearer token SubmitJob and CancelJob need (16..4096 visible characters)");
  flags.String("health-listen", &health_listen,
               "plaintext address serving only grpc.health.v1, for probes that cannot speak TLS (default: none)");
  Status st = flags.Parse(argc - 1, argv + 1);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (st.ok() && (lease_ms < 100 || lease_ms > 3'600'000)) st = InvalidArgument("--lease-ms: must be in 100..3600000");
  if (st.ok() && (max_heartbeats_per_s < 0 || max_heartbeats_per_s > 1'000'000)) {
    st = InvalidArgument("--max-heartbeats-per-s: must be in 0..1000000 (0: a fixed lease)");
  }
  if (st.ok() && keepalive_ms != 0 && (keepalive_ms < 1000 || keepalive_ms > 3'600'000)) {
    st = InvalidArgument("--keepalive-ms: must be 0 (never) or in 1000..3600000");
  }
  if (st.ok() && (adopt_grace_ms < 100 || adopt_grace_ms > 86'400'000)) {
    st = InvalidArgument("--adopt-grace-ms: must be in 100..86400000");
  }
  if (st.ok() && (metrics_retention_s < 0 || metrics_retention_s > 30 * 86400)) {
    st = InvalidArgument("--metrics-retention-s: must be in 0..2592000");
  }
  if (st.ok() && (max_jobs < 1 || max_jobs > 1'000'000)) st = InvalidArgument("--max-jobs: must be in 1..1000000");
  if (st.ok() && (trace_actions < 1000 || trace_actions > 100'000'000)) {
    st = InvalidArgument("--trace-actions: must be in 1000..100000000");
  }
  if (st.ok() && !etcd.empty() && !state.empty()) {
    st = InvalidArgument("--etcd: the state is kept in etcd; --state (a SQLite file) is for a single coordinator");
  }
  if (st.ok() && (ha_lease_s < 1 || ha_lease_s > 600)) st = InvalidArgument("--ha-lease-s: must be in 1..600");
  if (st.ok() && (ha_name.empty() || ha_name.size() > 63 ||
                  ha_name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)) {
    st = InvalidArgument("--ha-name: must be 1..63 of a-z, 0-9 and '-', got \"" + ha_name + "\"");
  }
  std::unique_ptr<coordinator::ha::EtcdClient> etcd_client;
  if (st.ok() && !etcd.empty()) {
    auto connected = coordinator::ha::EtcdClient::Connect(etcd, std::chrono::seconds(3));
    if (connected.ok()) etcd_client = std::move(connected).value();
    st = connected.status();
  }
  if (!st.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", st.message().c_str());
    return 2;
  }

  auto security = coordinator::ServerSecurityFromFlags(security_flags);
  if (!security.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", security.status().message().c_str());
    return 2;
  }
  if (security->plaintext()) std::fprintf(stderr, "%s\n", coordinator::kPlaintextWarning);

  coordinator::CoordinatorOptions options;
  options.lease = std::chrono::milliseconds(lease_ms);
  options.max_heartbeats_per_s = max_heartbeats_per_s;
  options.adopt_grace = std::chrono::milliseconds(adopt_grace_ms);
  options.metrics_retention = std::chrono::seconds(metrics_retention_s);
  options.max_jobs = static_cast<size_t>(max_jobs);
  options.trace_actions_per_job = static_cast<size_t>(trace_actions);
  coordinator::http::PrometheusMetrics metrics;
  options.metrics = &metrics;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  // The health port answers from the start, standby or not: "" SERVING while the process runs
  // (liveness), "pipecoord.active" SERVING only once this coordinator serves (readiness: a
  // Kubernetes Service then routes to the active one).
  std::unique_ptr<grpc::Server> health_port;
  if (!health_listen.empty()) {
    int hport = 0;
    auto started = coordinator::StartHealthPort(health_listen, &hport);
    if (!started.ok()) {
      std::fprintf(stderr, "coordinator: %s\n", started.status().message().c_str());
      return 1;
    }
    health_port = std::move(started).value();
    health_port->GetHealthCheckService()->SetServingStatus(kActiveService, false);
    std::printf("coordinator health on %s:%d (grpc.health.v1 only, plaintext)\n",
                health_listen.substr(0, health_listen.rfind(':')).c_str(), hport);
    std::fflush(stdout);
  }
  std::unique_ptr<coordinator::ha::Candidate> candidate;
  const coordinator::ha::EtcdLeadership* leadership = nullptr;
  if (etcd_client) {
    coordinator::ha::CandidateOptions copts;
    copts.election = "/pipecoord/" + ha_name + "/leader";
    copts.value = advertise.empty() ? listen : advertise;
    copts.lease_ttl_s = ha_lease_s;
    // Lost leadership: another coordinator may already be active, so this one stops at once (no
    // graceful shutdown that could still write or send); its supervisor starts it again as a standby.
    auto lost = [](const Status& why) {
      std::fprintf(stderr, "coordinator: %s; exiting\n", why.message().c_str());
      std::fflush(stderr);
      _exit(3);
    };
    candidate = std::make_unique<coordinator::ha::Candidate>(etcd_client.get(), copts, lost);
    std::printf("coordinator standby: campaigning in etcd %s for %s\n", etcd.c_str(), copts.election.c_str());
    std::fflush(stdout);
    auto won = candidate->WaitUntilElected(g_stop, [](const std::string& line) {
      std::printf("coordinator standby: %s\n", line.c_str());
      std::fflush(stdout);
    });
    if (!won.ok()) return 0;  // stopped while standing by
    leadership = *won;
    std::printf("coordinator elected: %s is active (election key revision %lld)\n", copts.value.c_str(),
                static_cast<long long>(leadership->create_revision));
    std::fflush(stdout);
  }
  std::unique_ptr<coordinator::StateStore> store;
  if (etcd_client) {
    store = std::make_unique<coordinator::ha::EtcdStateStore>(
        etcd_client.get(), "/pipecoord/" + ha_name + "/state/", leadership, [](const Status& why) {
          std::fprintf(stderr, "coordinator: %s; exiting\n", why.message().c_str());
          std::fflush(stderr);
          _exit(3);
        });
    options.store = store.get();
  } else if (!state.empty()) {
    auto opened = coordinator::StateStore::Open(state);
    if (!opened.ok()) {
      std::fprintf(stderr, "coordinator: %s\n", opened.status().message().c_str());
      return 2;
    }
    store = std::move(opened).value();
    options.store = store.get();
  }
  coordinator::Coordinator core(options);
  if (Status restored = core.Restore(); !restored.ok()) {
    std::fprintf(stderr, "coordinator: %s%s\n", etcd_client ? "" : ("--state " + state + ": ").c_str(),
                 restored.message().c_str());
    return 1;
  }
  coordinator::JobServiceImpl jobs(&core, &security->auth);
  coordinator::WorkerServiceImpl workers(&core, &security->auth);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, security->credentials, &port);
  // gRPC sets SO_REUSEPORT by default, so a second coordinator on a port in use would start and
  // split the clients with the first. One coordinator per port: the bind must fail.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(64 << 20);  // telemetry batches and CSV schedules stay well under
  // Keepalive: a worker or client whose host vanished is found in ~15 s (ping every 10 s, 5 s to
  // answer), and workers may ping idle streams every 10 s without being told off.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms > 0 ? keepalive_ms : INT_MAX);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.RegisterService(&jobs);
  builder.RegisterService(&workers);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    const size_t colon = listen.rfind(':');
    const int wanted = colon == std::string::npos ? 0 : std::atoi(listen.c_str() + colon + 1);
    const std::string holder = wanted > 0 ? ListeningPortHolder(wanted) : "";
    std::fprintf(stderr, "coordinator: --listen %s: cannot listen on %s%s\n", listen.c_str(), listen.c_str(),
                 holder.empty() ? " (the port is in use, or the address is not this host's)"
                                : (": port " + std::to_string(wanted) + " is in use by " + holder).c_str());
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::printf("coordinator listening on %s:%d\n", host.c_str(), port);
  if (!security->plaintext()) {
    std::printf("coordinator security: TLS; WorkerService needs a client certificate from %s naming the worker; "
                "SubmitJob and CancelJob need the bearer token of %s\n",
                security_flags.tls_ca.c_str(), security_flags.token_file.c_str());
  }
  std::unique_ptr<coordinator::http::HttpServer> web;
  if (!http.empty()) {
    auto started = coordinator::http::HttpServer::Start(http, &core, &metrics);
    if (!started.ok()) {
      std::fprintf(stderr, "coordinator: %s\n", started.status().message().c_str());
      return 1;
    }
    web = std::move(started).value();
    std::printf("coordinator http on %s:%d (/metrics, dashboard at /)\n", http.substr(0, http.rfind(':')).c_str(),
                web->port());
  }
  server->GetHealthCheckService()->SetServingStatus(kActiveService, true);
  if (health_port) health_port->GetHealthCheckService()->SetServingStatus(kActiveService, true);
  std::fflush(stdout);
  while (!g_stop) {
    std::this_thread::sleep_for(coordinator::TickPeriod(options.lease));
    core.Tick();
  }
  web.reset();
  core.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  candidate.reset();  // resigns: a standby takes over now, not after --ha-lease-s
  return 0;
}
