#include "coordinator/worker_registry.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace pipecoord::coordinator {

std::string WorkerRegistry::ChooseId(const std::string& requested, uint64_t* next_id) const {
  if (!requested.empty() && Find(requested) == nullptr) return requested;
  // A fresh identity; an id already live is never shared by two workers.
  char buf[32];
  do {
    std::snprintf(buf, sizeof buf, "worker-%04llu", static_cast<unsigned long long>((*next_id)++));
  } while (Find(buf) != nullptr);
  return buf;
}

RegisteredWorker& WorkerRegistry::Add(const std::string& id, const v1::RegisterRequest& r, Clock::time_point now) {
  auto w = std::make_unique<RegisteredWorker>();
  w->info.set_worker_id(id);
  w->info.set_host(r.host());
  w->info.set_device_kind(r.device_kind());
  w->info.set_worker_kind(r.worker_kind());
  w->info.set_device_memory_bytes(r.device_memory_bytes());
  w->info.set_data_endpoint(r.data_endpoint());
  w->info.set_rank(-1);
  if (!r.held_job_id().empty()) {
    w->info.set_job_id(r.held_job_id());
    w->info.set_closing(true);
    w->session = r.held_session();
  }
  w->lease_expiry = now + lease_;
  return *(workers_[id] = std::move(w));
}

bool WorkerRegistry::Renew(RegisteredWorker& w, Clock::time_point now) {
  w.lease_expiry = now + lease_;
  const bool was_suspect = w.suspect;
  w.suspect = false;  // alive after all: it may take work again
  return was_suspect;
}

std::vector<std::string> WorkerRegistry::Expired(Clock::time_point now) const {
  std::vector<std::string> out;
  for (const auto& [id, w] : workers_) {
    if (w->lease_expiry < now) out.push_back(id);
  }
  return out;
}

WorkerRegistry::Left WorkerRegistry::Remove(const std::string& id) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return {};
  Left left;
  // A worker only closing a job it was part of takes nothing with it.
  if (!it->second->info.closing()) left.job_id = it->second->info.job_id();
  left.rank = it->second->info.rank();
  workers_.erase(it);
  if (on_commands_) on_commands_(id);  // its stream ends (the worker must register again)
  return left;
}

RegisteredWorker* WorkerRegistry::Find(const std::string& id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : it->second.get();
}

std::vector<v1::WorkerInfo> WorkerRegistry::List(Clock::time_point now) const {
  std::vector<v1::WorkerInfo> out;
  for (const auto& [id, w] : workers_) {
    v1::WorkerInfo info = w->info;
    info.set_lease_expires_in_ms(std::chrono::duration_cast<std::chrono::milliseconds>(w->lease_expiry - now).count());
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<RegisteredWorker*> WorkerRegistry::Available(const std::string& device_kind,
                                                         const std::string& worker_kind) const {
  const std::string wanted = v1::NormalWorkerKind(worker_kind);
  std::vector<RegisteredWorker*> out;
  for (const auto& [id, w] : workers_) {
    if (w->free() && !w->suspect && !w->draining && w->info.device_kind() == device_kind &&
        v1::NormalWorkerKind(w->info.worker_kind()) == wanted) {
      out.push_back(w.get());
    }
  }
  return out;
}

WorkerRegistry::Capacity WorkerRegistry::FreeCapacity(const std::string& device_kind) const {
  Capacity c;
  std::map<std::string, int> per_host;
  for (const RegisteredWorker* w : Available(device_kind)) {
    ++c.count;
    c.largest_host = std::max(c.largest_host, ++per_host[w->info.host()]);
    const uint64_t m = w->info.device_memory_bytes();
    if (m > 0 && (c.smallest_memory_bytes == 0 || m < c.smallest_memory_bytes)) c.smallest_memory_bytes = m;
  }
  return c;
}

void WorkerRegistry::Assign(RegisteredWorker& w, const std::string& job_id, int g, const RankLayout& layout,
                            uint64_t session) {
  w.info.set_job_id(job_id);
  w.info.set_rank(layout.PipelineRank(g));
  w.info.set_closing(false);
  w.global_rank = g;
  w.dp_rank = layout.DataRank(g);
  w.tp_rank = layout.TensorRank(g);
  w.session = session;
}

void WorkerRegistry::Close(const std::string& id, const std::string& job_id, uint64_t session, bool cancel) {
  RegisteredWorker* w = Find(id);
  if (w == nullptr || !w->Holds(job_id, session) || w->info.closing()) return;
  if (cancel) {
    v1::WorkerCommand c;
    c.set_cancel_job_id(job_id);
    Queue(*w, std::move(c));
  }
  w->info.set_closing(true);
}

void WorkerRegistry::Queue(RegisteredWorker& w, v1::WorkerCommand command) {
  w.commands.push_back(std::move(command));
  if (on_commands_) on_commands_(w.info.worker_id());
}

void WorkerRegistry::Free(RegisteredWorker& w) {
  w.info.clear_job_id();
  w.info.set_rank(-1);
  w.info.set_closing(false);
  w.global_rank = w.dp_rank = w.tp_rank = -1;
  w.session = 0;
}

void WorkerRegistry::MarkSuspect(const std::string& id) {
  if (RegisteredWorker* w = Find(id); w != nullptr) w->suspect = true;
}

}  // namespace pipecoord::coordinator
