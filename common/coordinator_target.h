// CoordinatorTarget: the gRPC channel target for a --coordinator value (workers, pipectl).
//
// One HOST:PORT is used as given (gRPC resolves the name, and re-resolves it when a connection
// breaks: a Kubernetes Service over the elected coordinator). Several, comma-separated (the
// coordinators of one high-availability group), are resolved now into one "ipv4:" or "ipv6:"
// target; gRPC's default pick_first policy connects to the first address that accepts, and again
// from the first when that connection breaks. Only the active coordinator listens (standbys do
// not), so the channel follows the active one. `authority` is the first HOST:PORT as written (what
// TLS checks the certificate against; the channel sets it as its default authority).
#ifndef PIPECOORD_COMMON_COORDINATOR_TARGET_H_
#define PIPECOORD_COMMON_COORDINATOR_TARGET_H_

#include <string>

#include "common/status.h"

namespace pipecoord {

struct CoordinatorTarget {
  std::string target;     // for grpc::CreateCustomChannel
  std::string authority;  // "" for a single address (gRPC's own default)
};

// INVALID_ARGUMENT naming `flag` when an entry is not HOST:PORT or a host does not resolve.
Result<CoordinatorTarget> ResolveCoordinatorTarget(const std::string& flag, const std::string& value);

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_COORDINATOR_TARGET_H_
