// The etcd store against the SQLite one (the same writes give the same Load) and against etcd's
// own election: writes guarded by a lost election change nothing. A real etcd (etcd_for_tests.h).
#include "coordinator/ha/etcd_state_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "coordinator/ha/etcd_for_tests.h"

namespace pipecoord::coordinator::ha {
namespace {

using std::chrono::milliseconds;

class EtcdStateStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    etcd_ = new EtcdForTests("store");
    ASSERT_TRUE(etcd_->Ready()) << "etcd did not start";
  }
  static void TearDownTestSuite() { delete etcd_; }
  std::unique_ptr<EtcdClient> Client(const std::string& endpoints = "") {
    auto c = EtcdClient::Connect(endpoints.empty() ? etcd_->endpoint() : endpoints, milliseconds(3000));
    EXPECT_TRUE(c.ok());
    return std::move(c).value();
  }
  static EtcdForTests* etcd_;
};
EtcdForTests* EtcdStateStoreTest::etcd_ = nullptr;

// The writes a coordinator makes over two jobs' lives, one of them deleted.
void Script(StateStore& s) {
  v1::Job a;
  a.set_id("job-000001");
  a.set_state(v1::RUNNING);
  a.mutable_spec()->set_pp(4);
  a.add_events()->set_message("not in the row");
  ASSERT_TRUE(s.PutJob(a).ok());
  v1::Job b;
  b.set_id("job-000010");  // sorts before job-000002 by key: order must come from submission
  ASSERT_TRUE(s.PutJob(b).ok());
  v1::Job c;
  c.set_id("job-000002");
  ASSERT_TRUE(s.PutJob(c).ok());
  a.set_state(v1::SUCCEEDED);
  ASSERT_TRUE(s.PutJob(a).ok());  // an update keeps the job's place
  std::vector<int64_t> seqs;
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(s.AppendEvent(i % 2 ? "job-000001" : "job-000010", "event " + std::to_string(i)).ok());
    v1::StepRecord step;
    step.set_step(i);
    step.set_loss(1.0 / (i + 1));
    ASSERT_TRUE(s.AppendStep("job-000001", step).ok());
    v1::TelemetryBatch batch;
    batch.set_job_id("job-000001");
    batch.add_actions()->set_start_ns(100 + i);
    auto seq = s.AppendTelemetry("job-000001", batch);
    ASSERT_TRUE(seq.ok());
    if (!seqs.empty()) {
      EXPECT_GT(*seq, seqs.back());
    }
    seqs.push_back(*seq);
  }
  ASSERT_TRUE(s.DropTelemetryBefore("job-000001", seqs[5]).ok());  // keeps batches 5..11
  ASSERT_TRUE(s.PutCheckpointedSteps("job-000001", 8).ok());
  ASSERT_TRUE(s.PutCheckpointedSteps("job-000002", 3).ok());
  ASSERT_TRUE(s.DeleteJob("job-000002").ok());
  ASSERT_TRUE(s.PutWorker("worker-0002").ok());
  ASSERT_TRUE(s.PutWorker("worker-0001").ok());
  ASSERT_TRUE(s.PutCounters(11, 3, 7, 5).ok());
}

// Everything Load gives back, as text (telemetry seqs left out: each store numbers its own rows).
std::string Dump(StateStore& s) {
  std::vector<std::vector<std::string>> events;
  auto st = s.Load(&events);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  if (!st.ok()) return "";
  std::string out;
  for (size_t j = 0; j < st->jobs.size(); ++j) {
    out += "job " + st->jobs[j].ShortDebugString() + "\n";
    for (const std::string& e : events[j]) out += "  event " + e + "\n";
    for (const StoredBatch& b : st->telemetry[j]) out += "  batch " + b.batch.ShortDebugString() + "\n";
  }
  for (const std::string& w : st->worker_ids) out += "worker " + w + "\n";
  out += "counters " + std::to_string(st->next_job) + " " + std::to_string(st->next_worker) + " " +
         std::to_string(st->next_session) + " " + std::to_string(st->epoch) + "\n";
  return out;
}

TEST_F(EtcdStateStoreTest, TheSameWritesLoadAsTheStateFileDoes) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                           "/etcd-store-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  auto file = StateStore::Open(path);
  ASSERT_TRUE(file.ok());
  Script(**file);
  auto client = Client();
  EtcdStateStore etcd(client.get(), "/t1/state/", nullptr, nullptr);
  Script(etcd);
  const std::string want = Dump(**file);
  EXPECT_NE(want.find("job-000010"), std::string::npos);
  EXPECT_EQ(want.find("job-000002"), std::string::npos);
  EXPECT_NE(want.find("start_ns: 105"), std::string::npos);
  EXPECT_EQ(want.find("start_ns: 104"), std::string::npos);
  EXPECT_EQ(Dump(etcd), want);
  // Another coordinator (a new store over a new client) reads the same, and numbers its rows on.
  auto other_client = Client();
  EtcdStateStore other(other_client.get(), "/t1/state/", nullptr, nullptr);
  EXPECT_EQ(Dump(other), want);
  v1::TelemetryBatch batch;
  batch.add_actions()->set_start_ns(999);
  auto seq = other.AppendTelemetry("job-000001", batch);
  ASSERT_TRUE(seq.ok());
  std::vector<std::vector<std::string>> events;
  auto loaded = other.Load(&events);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->telemetry[0].size(), 8u);
  EXPECT_EQ(loaded->telemetry[0].back().seq, *seq);
  EXPECT_GT(*seq, loaded->telemetry[0][6].seq);
  // A prefix is a namespace: another one is empty.
  EtcdStateStore empty(client.get(), "/t1/other/", nullptr, nullptr);
  EXPECT_EQ(Dump(empty), "counters 1 1 1 0\n");
}

TEST_F(EtcdStateStoreTest, WritesOfALostElectionChangeNothing) {
  auto a = Client(), b = Client();
  auto lease_a = a->GrantLease(30);
  auto lease_b = b->GrantLease(30);
  ASSERT_TRUE(lease_a.ok() && lease_b.ok()) << lease_a.status().ToString();
  std::atomic<bool> stop{false};
  auto led_a = a->Campaign("/t2/leader", *lease_a, "coordinator-a", stop);
  ASSERT_TRUE(led_a.ok()) << led_a.status().ToString();
  int lost = 0;
  std::string lost_why;
  EtcdStateStore store_a(a.get(), "/t2/state/", &*led_a, [&](const Status& st) {
    ++lost;
    lost_why = st.message();
  });
  ASSERT_TRUE(store_a.PutCounters(1, 1, 1, 1).ok());
  EXPECT_EQ(a->Leader("/t2/leader").value(), "coordinator-a");
  // B queues behind A, and leads once A's lease is gone (as when A pauses past its TTL).
  Result<EtcdLeadership> led_b = Unavailable("not yet");
  std::thread campaign([&] { led_b = b->Campaign("/t2/leader", *lease_b, "coordinator-b", stop); });
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(a->Leader("/t2/leader").value(), "coordinator-a");
  ASSERT_TRUE(a->RevokeLease(*lease_a).ok());
  campaign.join();
  ASSERT_TRUE(led_b.ok()) << led_b.status().ToString();
  EXPECT_GT(led_b->create_revision, led_a->create_revision);  // the epoch grows
  EXPECT_EQ(b->Leader("/t2/leader").value(), "coordinator-b");
  EXPECT_EQ(a->KeepAlive(*lease_a).value(), 0);  // A can tell it is gone
  EXPECT_GT(b->KeepAlive(*lease_b).value(), 0);
  // A's writes now fail, once reported, and change nothing B reads.
  Status st = store_a.PutCounters(9, 9, 9, 9);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("no longer the elected coordinator"), std::string::npos) << st.message();
  EXPECT_EQ(store_a.PutWorker("worker-stale").code(), Code::kFailedPrecondition);
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(lost_why, st.message());
  EtcdStateStore store_b(b.get(), "/t2/state/", &*led_b, nullptr);
  EXPECT_EQ(Dump(store_b), "counters 1 1 1 1\n");
  EXPECT_TRUE(store_b.PutCounters(1, 1, 1, 2).ok());
}

TEST_F(EtcdStateStoreTest, ManyKeysAreReadInPagesAndADeadMemberIsSkipped) {
  // The first endpoint has nothing listening: every call goes on to the live member.
  auto client = Client("127.0.0.1:" + std::to_string(FreeLoopbackPort()) + "," + etcd_->endpoint());
  for (int t = 0; t < 25; ++t) {
    std::vector<EtcdOp> ops;
    for (int i = 0; i < 100; ++i) {
      char key[32];
      std::snprintf(key, sizeof key, "/t3/k%05d", t * 100 + i);
      ops.push_back(EtcdOp::Put(key, std::to_string(t * 100 + i)));
    }
    ASSERT_TRUE(client->Txn(ops, nullptr).ok());
  }
  auto all = client->GetPrefix("/t3/");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2500u);
  for (int i = 0; i < 2500; ++i) ASSERT_EQ((*all)[i].value, std::to_string(i));
  ASSERT_TRUE(client->Txn({EtcdOp::DeleteRange("/t3/k00000", "/t3/k01000")}, nullptr).ok());
  EXPECT_EQ(client->GetPrefix("/t3/").value().size(), 1500u);
}

TEST(EtcdClientTest, BadEndpointsAreRefusedNamingTheFlag) {
  for (const char* bad : {"", "localhost", "host:", ":2379", "a:1,,b:2", "h:12x", "https://h:2379"}) {
    auto c = EtcdClient::Connect(bad, milliseconds(100));
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(c.status().message().rfind("--etcd: ", 0), 0u) << c.status().message();
  }
  EXPECT_TRUE(EtcdClient::Connect("http://127.0.0.1:2379,etcd-1.etcd:2379", milliseconds(100)).ok());
}

}  // namespace
}  // namespace pipecoord::coordinator::ha
