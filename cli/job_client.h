// The job verbs' connection to the coordinator: its address and credentials (from the verb's
// flags, else the environment), a stub, and gRPC errors as Status values.
#ifndef PIPECOORD_CLI_JOB_CLIENT_H_
#define PIPECOORD_CLI_JOB_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/flags.h"
#include "common/status.h"
#include "proto/job.grpc.pb.h"

namespace pipecoord::cli {

struct Connection {
  std::string address;  // --coordinator, else $PIPECOORD_ADDR, else 127.0.0.1:50051
  std::string tls_ca;   // --tls-ca, else $PIPECOORD_TLS_CA; empty: plaintext
  std::string token;    // --token, else $PIPECOORD_TOKEN; sent on every call, only over TLS
};

// Declares --coordinator, --tls-ca and --token on a verb's flags.
void AddConnectionFlags(FlagSet& flags, Connection* connection);

// Completes `connection` from the environment where its flags were not given, then makes the
// stub. INVALID_ARGUMENT naming the flag: an unreadable CA file, a token without a CA, a
// malformed token.
Result<std::unique_ptr<v1::JobService::Stub>> JobStub(Connection* connection);

// A context with a deadline `seconds` from now.
std::unique_ptr<grpc::ClientContext> Deadline(int seconds);

// The gRPC status as a Status: INVALID_ARGUMENT and NOT_FOUND keep their codes (exit 2);
// UNAUTHENTICATED and PERMISSION_DENIED say the coordinator refused the credentials; an
// unreachable coordinator says which address was tried and whether TLS was used.
Status FromGrpc(const grpc::Status& status, const Connection& connection);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_JOB_CLIENT_H_
