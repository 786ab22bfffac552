#include "cli/job_client.h"

#include <cstdlib>

#include "common/client_credentials.h"
#include "common/coordinator_target.h"

namespace pipecoord::cli {
namespace {

void FromEnv(std::string* value, const char* name) {
  if (!value->empty()) return;
  if (const char* env = std::getenv(name); env != nullptr && *env != '\0') *value = env;
}

}  // namespace

void AddConnectionFlags(FlagSet& flags, Connection* c) {
  flags.String("coordinator", &c->address,
               "coordinator address (default $PIPECOORD_ADDR or 127.0.0.1:50051); HOST:PORT,HOST:PORT,... names the "
               "coordinators of a high-availability group, and calls go to the active one");
  flags.String("tls-ca", &c->tls_ca,
               "PEM CA to verify the coordinator's TLS certificate with (default $PIPECOORD_TLS_CA; none: plaintext)");
  flags.String("token", &c->token,
               "bearer token for submit and cancel (default $PIPECOORD_TOKEN, which keeps it out of the process "
               "list); needs --tls-ca");
}

Result<std::unique_ptr<v1::JobService::Stub>> JobStub(Connection* c) {
  FromEnv(&c->address, "PIPECOORD_ADDR");
  if (c->address.empty()) c->address = "127.0.0.1:50051";
  FromEnv(&c->tls_ca, "PIPECOORD_TLS_CA");
  FromEnv(&c->token, "PIPECOORD_TOKEN");
  ClientTlsFlags tls;
  tls.ca_file = c->tls_ca;
  tls.token = c->token;
  auto credentials = ClientCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  auto target = ResolveCoordinatorTarget("--coordinator", c->address);
  if (!target.ok()) return target.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);  // plans and traces of large jobs
  // `pipectl watch` reconnects through a failover within 2 s, not gRPC's default of up to 2 min.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (!target->authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target->authority);
  return v1::JobService::NewStub(grpc::CreateCustomChannel(target->target, *credentials, args));
}

std::unique_ptr<grpc::ClientContext> Deadline(int seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

Status FromGrpc(const grpc::Status& s, const Connection& c) {
  switch (s.error_code()) {
    case grpc::StatusCode::OK: return Status::Ok();
    case grpc::StatusCode::INVALID_ARGUMENT: return InvalidArgument(s.error_message());
    case grpc::StatusCode::NOT_FOUND: return NotFound(s.error_message());
    case grpc::StatusCode::UNAUTHENTICATED:
      return Unauthenticated("the coordinator at " + c.address + " refused the call: " + s.error_message());
    case grpc::StatusCode::PERMISSION_DENIED: return PermissionDenied(s.error_message());
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Unavailable("coordinator at " + c.address + " not reachable " +
                         (c.tls_ca.empty() ? "in plaintext" : "over TLS with CA " + c.tls_ca) + " (" + s.error_message() +
                         "); start one or pass --coordinator HOST:PORT / set PIPECOORD_ADDR" +
                         (c.tls_ca.empty() ? "; if it serves TLS, pass --tls-ca FILE / set PIPECOORD_TLS_CA" : ""));
    default: return Internal(s.error_message());
  }
}

}  // namespace pipecoord::cli
