#include "coordinator/health_port.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>

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
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) return Unavailable("--health-listen: cannot listen on " + address);
  return server;
}

}  // namespace pipecoord::coordinator
