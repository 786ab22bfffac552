// worker: a pipecoord worker daemon. Registers with the coordinator, keeps its lease, runs the
// job lists it is assigned on its compute backend and reports telemetry; then waits for more.
//   worker --coordinator 127.0.0.1:50051 [--device cpu] [--data-listen 127.0.0.1:0] [--advertise HOST]
//          [--tls-ca FILE --tls-cert FILE --tls-key FILE]
// This file parses the flags and wires SIGINT/SIGTERM to a graceful stop; the daemon itself is
// worker/daemon/daemon.h.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "common/client_credentials.h"
#include "common/coordinator_target.h"
#include "common/flags.h"
#include "common/host_memory.h"
#include "kernels/cpu/freed_memory.h"
#include "worker/daemon/daemon.h"
#include "worker/transport/endpoint.h"
#include "worker/daemon/fault_injection.h"

namespace {

std::atomic<bool> g_stop{false};  // set by SIGINT and SIGTERM; the daemon shuts down gracefully
void OnSignal(int) { g_stop = true; }

}  // namespace

int main(int argc, char** argv) {
  using namespace pipecoord;
  std::string coordinator_addr, device = "cpu", data_listen = "127.0.0.1:0", advertise;
  FlagSet flags("worker --coordinator HOST:PORT [--device cpu|cuda] [--data-listen HOST:PORT] [--advertise HOST] "
                     "[--checkpoint-dir DIR] [--coordinator-grace-s N] [--tls-ca FILE --tls-cert FILE --tls-key FILE]",
                     "A pipecoord worker: registers with the coordinator, runs the job lists it is "
                     "assigned (its rank comes from the assignment) and reports telemetry.");
  flags.String("coordinator", &coordinator_addr,
               "the coordinator's gRPC address (or PIPECOORD_ADDR); HOST:PORT,HOST:PORT,... names the coordinators "
               "of a high-availability group, and the worker follows the active one");
  flags.String("device", &device, "compute backend: cpu (default) or cuda");
  std::string memory;
  flags.String("memory", &memory,
               "memory this worker offers jobs, e.g. 8GiB (default: cpu: the cgroup's limit, else the "
               "machine's MemTotal; cuda: not reported)");
  std::string checkpoint_dir;
  flags.String("checkpoint-dir", &checkpoint_dir,
               "directory for the checkpoints of jobs with checkpointEvery (DIR/JOB/rank-G/step-N.safetensors); a "
               "replacement worker resumes from it: give it the failed worker's volume (a StatefulSet does) "
               "or one folder shared by all workers");
  std::string inject;
  flags.String("inject", &inject,
               "faults to inject, for tests and demos: RULE[,RULE...] with RULE slow:RANK:FACTOR[:STEP], "
               "hang:RANK:STEP, corrupt:RANK:STEP or oom:RANK:BYTES[:STEP] (RANK: global rank)");
  int coordinator_grace_s = 7200;
  flags.Int("coordinator-grace-s", &coordinator_grace_s,
            "how long a running job goes on with no coordinator answering, in seconds (default 7200): it keeps "
            "training and its telemetry while a coordinator restarts or fails over, then stops");
  flags.String("data-listen", &data_listen, "address peers send activations to (default 127.0.0.1:0: any free port)");
  flags.String("advertise", &advertise,
               "host name or IP peers dial for the data port, e.g. the pod IP (default: the --data-listen "
               "host; needed when that is 0.0.0.0)");
  // Mutual TLS to the coordinator (docs/operations.md "Security"); the data port stays plaintext.
  ClientTlsFlags tls;
  flags.String("tls-ca", &tls.ca_file, "PEM CA the coordinator's certificate must verify against (default: plaintext)");
  flags.String("tls-cert", &tls.cert_file,
               "PEM client certificate; its URI SAN urn:pipecoord:worker:ID is this worker's id (with --tls-ca)");
  flags.String("tls-key", &tls.key_file, "PEM private key of --tls-cert");
  Status st = flags.Parse(argc - 1, argv + 1);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (coordinator_addr.empty() && std::getenv("PIPECOORD_ADDR")) coordinator_addr = std::getenv("PIPECOORD_ADDR");
  if (st.ok() && coordinator_addr.empty()) st = InvalidArgument("--coordinator: required (or set PIPECOORD_ADDR)");
  CoordinatorTarget target{coordinator_addr, ""};
  // HOST:PORT (gRPC would dial port 443 of a bare host and retry forever); a gRPC target with a
  // scheme (dns:///, unix:, ipv4:) is taken as is.
  if (st.ok() && coordinator_addr.find(':') != std::string::npos &&
      (coordinator_addr.find("://") != std::string::npos || coordinator_addr.rfind("unix:", 0) == 0 ||
       coordinator_addr.rfind("ipv4:", 0) == 0 || coordinator_addr.rfind("ipv6:", 0) == 0)) {
    // a gRPC target URI
  } else if (st.ok() && coordinator_addr.find(',') != std::string::npos) {
    // Several: the coordinators of one high-availability group (common/coordinator_target.h).
    auto resolved = ResolveCoordinatorTarget("--coordinator", coordinator_addr);
    if (resolved.ok()) target = *resolved;
    else st = resolved.status();
  } else if (st.ok()) {
    auto hp = worker::ParseHostPort(coordinator_addr);
    if (!hp.ok() || hp->port == 0) {
      st = InvalidArgument("--coordinator: must be HOST:PORT (the coordinator's gRPC --listen address, e.g. "
                           "127.0.0.1:50051), got \"" + coordinator_addr + "\"");
    }
  }
  if (st.ok() && flags.Given("checkpoint-dir") && checkpoint_dir.empty()) st = InvalidArgument("--checkpoint-dir: must not be empty");
  if (st.ok() && device != "cpu" && device != "cuda") st = InvalidArgument("--device: must be cpu or cuda, got \"" + device + "\"");
  // Each micro-batch's saved activations reuse the memory the last one freed instead of
  // page-faulting anew (kernels/cpu/freed_memory.h): about a fifth of a CPU block's time.
  kernels::cpu::KeepFreedHostMemory();
  worker::DaemonOptions options;
  if (st.ok() && flags.Given("memory")) {
    auto bytes = ParseByteSize(memory, "--memory");
    if (bytes.ok()) options.memory_bytes = *bytes;
    else st = bytes.status();
  } else if (device == "cpu") {
    options.memory_bytes = HostMemoryLimitBytes();
  }
  if (st.ok()) {
    auto rules = worker::ParseFaultRules(inject);
    if (rules.ok()) options.faults = std::move(rules).value();
    else st = rules.status();
  }
  if (st.ok() && (coordinator_grace_s < 1 || coordinator_grace_s > 30 * 86400)) {
    st = InvalidArgument("--coordinator-grace-s: must be in 1..2592000");
  }
  options.coordinator_grace = std::chrono::seconds(coordinator_grace_s);
  const size_t colon = data_listen.rfind(':');
  if (st.ok() && colon == std::string::npos) st = InvalidArgument("--data-listen: must be HOST:PORT");
  // A host name or an IPv4/IPv6 address, never HOST:PORT nor an unexpanded "$(POD_IP)".
  const bool bad_advertise =
      (flags.Given("advertise") && advertise.empty()) || std::count(advertise.begin(), advertise.end(), ':') == 1 ||
      advertise.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:") != std::string::npos;
  if (st.ok() && bad_advertise) {
    st = InvalidArgument("--advertise: must be a host name or IP address without a port, got \"" + advertise + "\"");
  }
  if (st.ok() && !tls.ca_file.empty() && tls.cert_file.empty()) {
    st = InvalidArgument("--tls-cert: required with --tls-ca (the coordinator knows workers by their client certificate)");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (st.ok()) {
    auto made = ClientCredentials(tls);
    if (made.ok()) credentials = std::move(made).value();
    else st = made.status();
  }
  if (!st.ok()) {
    std::fprintf(stderr, "worker: %s\n", st.message().c_str());
    return 2;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Keepalive on the long-lived command and telemetry streams: a dead coordinator is noticed in
  // ~15 s even when no call is in flight (the server permits pings this often).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A coordinator that went away (restarted, failed over) is dialled again within 2 s, not after
  // gRPC's default backoff of up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (!target.authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target.authority);
  auto channel = grpc::CreateCustomChannel(target.target, credentials, args);
  options.device = device;
  options.data_host = data_listen.substr(0, colon);
  options.data_port = std::stoi(data_listen.substr(colon + 1));
  options.advertise = advertise;
  options.checkpoint_dir = checkpoint_dir;
  st = worker::Daemon(channel, std::move(options), g_stop).Run();
  if (!st.ok()) {
    std::fprintf(stderr, "worker: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
