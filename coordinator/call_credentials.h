// CallCredentialsOf: what a gRPC call presented to the coordinator (its authorization metadata and
// the client certificate its TLS handshake verified), for Auth (auth.h) to judge.
#ifndef PIPECOORD_COORDINATOR_CALL_CREDENTIALS_H_
#define PIPECOORD_COORDINATOR_CALL_CREDENTIALS_H_

#include <grpcpp/server_context.h>

#include "coordinator/auth.h"

namespace pipecoord::coordinator {

// Sync and callback handlers alike (grpc::ServerContext and grpc::CallbackServerContext).
CallCredentials CallCredentialsOf(const grpc::ServerContextBase& context);

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_CALL_CREDENTIALS_H_
