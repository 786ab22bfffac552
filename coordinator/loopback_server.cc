#include "coordinator/loopback_server.h"

namespace pipecoord::coordinator {

LoopbackServer::LoopbackServer(CoordinatorOptions options)
    : core_(std::move(options)), jobs_(&core_), workers_(&core_) {}

Result<std::unique_ptr<LoopbackServer>> LoopbackServer::Start(CoordinatorOptions options) {
  std::unique_ptr<LoopbackServer> s(new LoopbackServer(std::move(options)));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&s->jobs_);
  builder.RegisterService(&s->workers_);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || port == 0) return Unavailable("cannot listen on a loopback port");
  s->address_ = "127.0.0.1:" + std::to_string(port);
  LoopbackServer* self = s.get();
  s->ticker_ = std::thread([self] {
    while (!self->stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      self->core_.Tick();
    }
  });
  return s;
}

LoopbackServer::~LoopbackServer() {
  stop_ = true;
  if (ticker_.joinable()) ticker_.join();
  core_.Shutdown();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace pipecoord::coordinator
