// Helpers for tests of a coordinator over a state file, replaced by a new one on the same file.
#ifndef PIPECOORD_COORDINATOR_STATE_FILE_FOR_TESTS_H_
#define PIPECOORD_COORDINATOR_STATE_FILE_FOR_TESTS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "coordinator/coordinator.h"
#include "coordinator/state_store.h"

namespace pipecoord::coordinator {

// A state file of this test's own, empty.
inline std::string FreshStatePath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name + "-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  return path;
}

// A coordinator over the state file at `path`, restored from it (as a restarted process is).
struct OnFile {
  explicit OnFile(const std::string& path, CoordinatorOptions o = {}) {
    auto opened = StateStore::Open(path);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (opened.ok()) store = std::move(opened).value();
    o.store = store.get();
    c = std::make_unique<Coordinator>(o);
    restored = c->Restore();
  }
  std::unique_ptr<StateStore> store;
  std::unique_ptr<Coordinator> c;
  Status restored;
};

// Options whose re-adoption grace ends at once (EndAdoption): for tests of what follows when a
// RUNNING job's workers do not come back after a restart.
inline CoordinatorOptions ShortAdoption(CoordinatorOptions o = {}) {
  o.adopt_grace = std::chrono::milliseconds(1);
  return o;
}
// Lets a ShortAdoption grace pass and ticks, ending the re-adoption of every job waiting for it.
inline void EndAdoption(Coordinator& c) {
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  c.Tick();
}

// A CPU worker's registration; `id` set when it comes back under its identity.
inline v1::RegisterRequest CpuWorker(const std::string& id = "") {
  v1::RegisterRequest r;
  r.set_device_kind("cpu");
  r.set_data_endpoint("127.0.0.1:1");
  r.set_worker_id(id);
  return r;
}

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_STATE_FILE_FOR_TESTS_H_
