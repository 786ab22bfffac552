#include "coordinator/worker_registry.h"

#include <gtest/gtest.h>

namespace pipecoord::coordinator {
namespace {

using std::chrono::milliseconds;
using Clock = WorkerRegistry::Clock;

v1::RegisterRequest Request(const std::string& device = "cpu") {
  v1::RegisterRequest r;
  r.set_device_kind(device);
  r.set_data_endpoint("127.0.0.1:1");
  r.set_host("h");
  r.set_device_memory_bytes(1 << 20);
  return r;
}

std::vector<std::string> Ids(const std::vector<RegisteredWorker*>& workers) {
  std::vector<std::string> out;
  for (const RegisteredWorker* w : workers) out.push_back(w->info.worker_id());
  return out;
}

TEST(WorkerRegistryTest, AnIdIsTheOneAskedForUnlessItIsLive) {
  WorkerRegistry reg(milliseconds(100));
  uint64_t next = 1;
  EXPECT_EQ(reg.ChooseId("", &next), "worker-0001");
  EXPECT_EQ(next, 2u);
  reg.Add("worker-0002", Request(), Clock::now());
  EXPECT_EQ(reg.ChooseId("", &next), "worker-0003");  // the live worker-0002 is skipped
  EXPECT_EQ(reg.ChooseId("pod-7", &next), "pod-7");
  reg.Add("pod-7", Request(), Clock::now());
  EXPECT_EQ(reg.ChooseId("pod-7", &next), "worker-0004");  // never shared by two workers
  const RegisteredWorker* w = reg.Find("pod-7");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->free());
  EXPECT_EQ(w->info.rank(), -1);
  EXPECT_EQ(w->info.device_memory_bytes(), 1u << 20);
  EXPECT_EQ(reg.Find("nobody"), nullptr);
}

TEST(WorkerRegistryTest, AWorkerHoldsItsJobUntilItReleasesIt) {
  WorkerRegistry reg(milliseconds(100));
  RegisteredWorker& a = reg.Add("a", Request(), Clock::now());
  RegisteredWorker& b = reg.Add("b", Request(), Clock::now());
  reg.Add("gpu", Request("cuda"), Clock::now());
  EXPECT_EQ(Ids(reg.Available("cpu")), (std::vector<std::string>{"a", "b"}));
  reg.Assign(b, "job-1", 3, RankLayout::OfDegrees(2, 2, 1), 7);  // pp 2: global rank 3 is rank 1 of pipeline 1
  EXPECT_EQ(b.info.job_id(), "job-1");
  EXPECT_EQ(b.info.rank(), 1);
  EXPECT_EQ(b.global_rank, 3);
  EXPECT_EQ(b.dp_rank, 1);
  EXPECT_TRUE(b.Holds("job-1", 7));
  EXPECT_FALSE(b.Holds("job-1", 6));
  EXPECT_EQ(Ids(reg.Available("cpu")), std::vector<std::string>{"a"});
  // The job's part is over here: closing, told to stop when cancelled, still busy.
  reg.Close("b", "job-1", 6, true);  // an older attempt: nothing
  EXPECT_FALSE(b.info.closing());
  reg.Close("b", "job-1", 7, true);
  EXPECT_TRUE(b.info.closing());
  ASSERT_EQ(b.commands.size(), 1u);
  EXPECT_EQ(b.commands[0].cancel_job_id(), "job-1");
  reg.Close("b", "job-1", 7, true);  // once
  EXPECT_EQ(b.commands.size(), 1u);
  EXPECT_EQ(Ids(reg.Available("cpu")), std::vector<std::string>{"a"});
  reg.Free(b);
  EXPECT_TRUE(b.free());
  EXPECT_FALSE(b.info.closing());
  EXPECT_EQ(b.global_rank, -1);
  EXPECT_EQ(b.session, 0u);
  EXPECT_EQ(Ids(reg.Available("cpu")), (std::vector<std::string>{"a", "b"}));
  // Closing without cancel (the job succeeded) sends nothing.
  reg.Assign(a, "job-2", 0, RankLayout::OfDegrees(1, 2, 1), 8);
  reg.Close("a", "job-2", 8, false);
  EXPECT_TRUE(a.info.closing());
  EXPECT_TRUE(a.commands.empty());
}

// A job runs on its spec's worker program only: "" and "builtin" are the C++ daemon.
TEST(WorkerRegistryTest, WorkersAreOfferedByTheirKind) {
  WorkerRegistry reg(milliseconds(100));
  reg.Add("cpp", Request(), Clock::now());
  v1::RegisterRequest r = Request();
  r.set_worker_kind("torch");
  reg.Add("py", r, Clock::now());
  r.set_worker_kind("builtin");
  reg.Add("named", r, Clock::now());
  r = Request("cuda");
  r.set_worker_kind("torch");
  reg.Add("pygpu", r, Clock::now());
  EXPECT_EQ(Ids(reg.Available("cpu")), (std::vector<std::string>{"cpp", "named"}));
  EXPECT_EQ(Ids(reg.Available("cpu", "")), (std::vector<std::string>{"cpp", "named"}));
  EXPECT_EQ(Ids(reg.Available("cpu", "builtin")), (std::vector<std::string>{"cpp", "named"}));
  EXPECT_EQ(Ids(reg.Available("cpu", "torch")), std::vector<std::string>{"py"});
  EXPECT_EQ(Ids(reg.Available("cuda", "torch")), std::vector<std::string>{"pygpu"});
  EXPECT_EQ(reg.FreeCapacity("cpu").count, 2);  // "auto" plans for built-in workers only
  EXPECT_EQ(reg.Find("py")->info.worker_kind(), "torch");
}

TEST(WorkerRegistryTest, AWorkerRegisteringWithAHeldJobIsClosingIt) {
  WorkerRegistry reg(milliseconds(100));
  v1::RegisterRequest r = Request();
  r.set_held_job_id("job-1");
  r.set_held_session(4);
  RegisteredWorker& w = reg.Add("w", r, Clock::now());
  EXPECT_TRUE(w.Holds("job-1", 4));
  EXPECT_TRUE(w.info.closing());
  EXPECT_TRUE(reg.Available("cpu").empty());
  // It leaves nothing behind: it was no longer part of the job.
  WorkerRegistry::Left left = reg.Remove("w");
  EXPECT_EQ(left.job_id, "");
  EXPECT_TRUE(reg.empty());
}

TEST(WorkerRegistryTest, LeasesRunOutUnlessRenewed) {
  WorkerRegistry reg(milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  RegisteredWorker& a = reg.Add("a", Request(), t0);
  reg.Add("b", Request(), t0);
  EXPECT_TRUE(reg.Expired(t0 + milliseconds(100)).empty());
  EXPECT_FALSE(reg.Renew(a, t0 + milliseconds(50)));
  EXPECT_EQ(reg.Expired(t0 + milliseconds(101)), std::vector<std::string>{"b"});
  std::vector<v1::WorkerInfo> list = reg.List(t0 + milliseconds(30));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].worker_id(), "a");
  EXPECT_EQ(list[0].lease_expires_in_ms(), 120);
  EXPECT_EQ(list[1].lease_expires_in_ms(), 70);
  // A worker lost while it held a job takes the job's rank with it.
  reg.Assign(a, "job-1", 1, RankLayout::OfDegrees(2, 2, 1), 3);
  WorkerRegistry::Left left = reg.Remove("a");
  EXPECT_EQ(left.job_id, "job-1");
  EXPECT_EQ(left.rank, 1);
  EXPECT_EQ(reg.Find("a"), nullptr);
  EXPECT_EQ(reg.Remove("a").job_id, "");  // gone already
}

TEST(WorkerRegistryTest, ASuspectGetsNoWorkUntilItHeartbeats) {
  WorkerRegistry reg(milliseconds(100));
  RegisteredWorker& a = reg.Add("a", Request(), Clock::now());
  reg.MarkSuspect("a");
  reg.MarkSuspect("gone");  // nothing
  EXPECT_TRUE(reg.Available("cpu").empty());
  EXPECT_TRUE(reg.Renew(a, Clock::now()));
  EXPECT_FALSE(a.suspect);
  EXPECT_EQ(Ids(reg.Available("cpu")), std::vector<std::string>{"a"});
}

TEST(WorkerRegistryTest, FreeCapacityCountsFreeWorkersAndTheSmallestReportedMemory) {
  WorkerRegistry reg(milliseconds(100));
  EXPECT_EQ(reg.FreeCapacity("cpu").count, 0);
  RegisteredWorker& a = reg.Add("a", Request(), Clock::now());  // 1 MiB
  v1::RegisterRequest small = Request(), silent = Request();
  small.set_device_memory_bytes(4096);
  silent.set_device_memory_bytes(0);  // reported none: not the smallest
  reg.Add("b", silent, Clock::now());
  EXPECT_EQ(reg.FreeCapacity("cpu").count, 2);
  EXPECT_EQ(reg.FreeCapacity("cpu").smallest_memory_bytes, 1u << 20);
  RegisteredWorker& c = reg.Add("c", small, Clock::now());
  reg.Add("gpu", Request("cuda"), Clock::now());
  EXPECT_EQ(reg.FreeCapacity("cpu").count, 3);
  EXPECT_EQ(reg.FreeCapacity("cpu").smallest_memory_bytes, 4096u);
  reg.Assign(c, "job-1", 0, RankLayout::OfDegrees(1, 2, 1), 1);  // busy: not free capacity
  reg.MarkSuspect("a");
  EXPECT_EQ(reg.FreeCapacity("cpu").count, 1);
  EXPECT_EQ(reg.FreeCapacity("cpu").smallest_memory_bytes, 0u);
  (void)a;
  EXPECT_EQ(reg.FreeCapacity("cuda").count, 1);
}

}  // namespace
}  // namespace pipecoord::coordinator
