#include "coordinator/health_port.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>

#include <cstdlib>

#include "common/process_holders.h"

namespace pipecoord::coordinator {
namespace {

// Server plugins are global (the reflection plugin main.cc initialises adds itself to every
// server built afterwards); this server drops them all, so it serves health and nothing else.
class NoPlugins final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override { plugins->clear(); }
};

}  // namespace

Result<std::unique_ptr<grpc::Server>> StartHealthPort(const std::string& address, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<NoPlugins>());
  // A server needs a service of its own before it starts (the default health service is added
  // while it starts); this one answers every other method UNIMPLEMENTED, as an unknown method is.
  static grpc::CallbackGenericService unimplemented;
  builder.RegisterCallbackGenericService(&unimplemented);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a port in use fails, never shared
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    const size_t colon = address.rfind(':');
    const std::string holder = colon == std::string::npos ? "" : ListeningPortHolder(std::atoi(address.c_str() + colon + 1));
    return Unavailable("--health-listen: cannot listen on " + address +
                       (holder.empty() ? std::string(" (the port is in use, or the address is not this host's)")
                                       : ": the port is in use by " + holder));
  }
  return server;
}

}  // namespace pipecoord::coordinator
