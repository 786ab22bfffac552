// The caching allocator's policy on the CPU: a host-memory source with a capacity stands in for
// cudaMalloc, and events complete when the test says so (or when the allocator waits on them).
#include "kernels/caching_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

namespace pipecoord::kernels {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

// Host memory up to `capacity` bytes; remembers what it handed out so a test sees every segment
// come back exactly once.
class FakeSource final : public RawMemorySource {
 public:
  explicit FakeSource(size_t capacity) : capacity(capacity) {}
  ~FakeSource() override {
    for (auto& [ptr, bytes] : held) std::free(ptr);
  }
  Result<void*> Allocate(size_t bytes) override {
    ++allocations;
    if (fail_next_with_internal) {
      fail_next_with_internal = false;
      return Internal("fake source: broken");
    }
    if (held_bytes + bytes > capacity) {
      ++failures;
      return ResourceExhausted("fake source: " + std::to_string(bytes) + " bytes over capacity");
    }
    void* p = std::aligned_alloc(512, bytes);
    if (p == nullptr) return Internal("host aligned_alloc failed");
    held[p] = bytes;
    held_bytes += bytes;
    return p;
  }
  Status Free(void* ptr) override {
    auto it = held.find(ptr);
    if (it == held.end()) return Internal("fake source: free of a pointer it never gave");
    held_bytes -= it->second;
    held.erase(it);
    std::free(ptr);
    ++frees;
    return Status::Ok();
  }

  size_t capacity;
  size_t held_bytes = 0;
  std::map<void*, size_t> held;
  int allocations = 0, failures = 0, frees = 0;
  bool fail_next_with_internal = false;
};

// Events that complete only when Complete / CompleteOldest is called, or when waited on.
class FakeEvents final : public StreamEvents {
 public:
  struct Recorded {
    StreamId stream;
    bool complete = false;
    bool released = false;
  };
  Result<Event> Record(StreamId stream) override {
    if (fail_records) return Internal("fake events: record failed");
    events.push_back({stream});
    return static_cast<Event>(events.size() - 1);
  }
  Result<bool> IsComplete(Event e) override {
    EXPECT_FALSE(events.at(e).released) << "query of a released event";
    return events.at(e).complete;
  }
  Status Wait(Event e) override {
    EXPECT_FALSE(events.at(e).released) << "wait on a released event";
    ++waits;
    events.at(e).complete = true;
    return Status::Ok();
  }
  void Release(Event e) override {
    EXPECT_FALSE(events.at(e).released) << "event released twice";
    events.at(e).released = true;
  }
  // Stream order: the oldest incomplete event of `stream` completes first.
  bool CompleteOldest(StreamId stream) {
    for (Recorded& r : events) {
      if (r.stream == stream && !r.complete) return r.complete = true;
    }
    return false;
  }
  void CompleteAll(StreamId stream) {
    while (CompleteOldest(stream)) {
    }
  }
  int Unreleased() const {
    return static_cast<int>(std::count_if(events.begin(), events.end(), [](const Recorded& r) { return !r.released; }));
  }

  std::vector<Recorded> events;
  int waits = 0;
  bool fail_records = false;
};

// An allocator over the fakes, which the test keeps pointers to.
struct Pool {
  explicit Pool(size_t capacity = 1024 * kMiB, StreamId default_stream = 7) {
    auto s = std::make_unique<FakeSource>(capacity);
    auto e = std::make_unique<FakeEvents>();
    source = s.get();
    events = e.get();
    allocator = std::make_unique<CachingAllocator>(std::move(s), std::move(e),
                                                   CachingAllocator::Options{MemoryKind::kCuda, 3, default_stream});
  }
  void* Alloc(size_t bytes, StreamId stream) {
    auto p = allocator->Allocate(bytes, stream);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : nullptr;
  }
  void FreeOk(void* p) {
    Status s = allocator->Free(p);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  CachingAllocatorStats stats() const { return allocator->stats(); }

  FakeSource* source;
  FakeEvents* events;
  std::unique_ptr<CachingAllocator> allocator;
};

char* C(void* p) { return static_cast<char*>(p); }

constexpr StreamId kS1 = 1, kS2 = 2, kS3 = 3;

TEST(CachingAllocatorTest, RoundsRequestsAndCountsBytesExactly) {
  Pool pool;
  void* a = pool.Alloc(1, kS1);  // 512
  EXPECT_EQ(pool.stats().allocated_bytes_current, 512);
  EXPECT_EQ(pool.stats().reserved_bytes_current, int64_t{2 * kMiB});  // one small segment
  void* b = pool.Alloc(513, kS1);                                      // 1024
  void* c = pool.Alloc(kMiB, kS1);                                     // the largest small request
  EXPECT_EQ(pool.source->allocations, 1) << "all three fit in one 2 MiB segment";
  void* d = pool.Alloc(kMiB + 1, kS1);  // large: its own 2 MiB segment, not split (rest < 1 MiB)
  EXPECT_EQ(pool.source->allocations, 2);

  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes_current, int64_t{512 + 1024 + kMiB + 2 * kMiB});
  EXPECT_EQ(s.allocated_bytes_peak, s.allocated_bytes_current);
  EXPECT_EQ(s.reserved_bytes_current, int64_t{4 * kMiB});
  EXPECT_EQ(s.reserved_bytes_current, static_cast<int64_t>(pool.source->held_bytes));
  EXPECT_EQ(s.active_bytes_current, s.allocated_bytes_current);

  pool.FreeOk(b);
  pool.FreeOk(d);
  s = pool.stats();
  EXPECT_EQ(s.allocated_bytes_current, int64_t{512 + kMiB});
  EXPECT_EQ(s.allocated_bytes_peak, int64_t{512 + 1024 + 3 * kMiB});
  EXPECT_EQ(s.reserved_bytes_current, int64_t{4 * kMiB}) << "freed blocks stay cached";
  EXPECT_EQ(s.active_bytes_current, int64_t{512 + kMiB});
  pool.FreeOk(a);
  pool.FreeOk(c);
  s = pool.stats();
  EXPECT_EQ(s.allocated_bytes_current, 0);
  EXPECT_EQ(s.active_bytes_current, 0);
  EXPECT_EQ(s.reserved_bytes_current, int64_t{4 * kMiB});
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(s.num_ooms, 0);

  ASSERT_TRUE(pool.allocator->EmptyCache().ok());
  EXPECT_EQ(pool.stats().reserved_bytes_current, 0);
  EXPECT_EQ(pool.stats().reserved_bytes_peak, int64_t{4 * kMiB});
  EXPECT_EQ(pool.source->held_bytes, 0u);
  EXPECT_EQ(pool.source->frees, 2);
}

TEST(CachingAllocatorTest, StatsCarryTorchNames) {
  CachingAllocatorStats s;
  s.allocated_bytes_current = 1;
  s.allocated_bytes_peak = 2;
  s.reserved_bytes_current = 3;
  s.reserved_bytes_peak = 4;
  s.active_bytes_current = 5;
  s.active_bytes_peak = 6;
  s.owned_bytes_current = 9;
  s.owned_bytes_peak = 10;
  s.num_alloc_retries = 7;
  s.num_ooms = 8;
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"allocated_bytes.all.current", 1}, {"allocated_bytes.all.peak", 2}, {"reserved_bytes.all.current", 3},
      {"reserved_bytes.all.peak", 4},     {"active_bytes.all.current", 5}, {"active_bytes.all.peak", 6},
      {"owned_bytes.all.current", 9},     {"owned_bytes.all.peak", 10},    {"num_alloc_retries", 7},
      {"num_ooms", 8},
  };
  EXPECT_EQ(s.Named(), expected);
}

TEST(CachingAllocatorTest, SmallBlocksSplitAndMergeBack) {
  Pool pool;
  char* a = C(pool.Alloc(4 * kKiB, kS1));
  char* b = C(pool.Alloc(8 * kKiB, kS1));
  char* c = C(pool.Alloc(4 * kKiB, kS1));
  EXPECT_EQ(b, a + 4 * kKiB) << "split from the same segment, in address order";
  EXPECT_EQ(c, b + 8 * kKiB);

  pool.FreeOk(b);
  // Best fit: the 8 KiB hole beats the rest of the segment.
  char* d = C(pool.Alloc(6 * kKiB, kS1));
  EXPECT_EQ(d, b);
  char* e = C(pool.Alloc(2 * kKiB, kS1));
  EXPECT_EQ(e, b + 6 * kKiB) << "the 2 KiB left of the hole";

  for (char* p : {a, d, e, c}) pool.FreeOk(p);
  // Everything merged back into one free 2 MiB block: two 1 MiB requests fill it exactly.
  auto snapshot = pool.allocator->Snapshot();
  ASSERT_EQ(snapshot.size(), 1u);
  ASSERT_EQ(snapshot[0].blocks.size(), 1u);
  EXPECT_EQ(snapshot[0].blocks[0].size, 2 * kMiB);
  EXPECT_EQ(snapshot[0].blocks[0].state, CachingAllocatorSegment::BlockState::kFree);
  char* f = C(pool.Alloc(kMiB, kS1));
  char* g = C(pool.Alloc(kMiB, kS1));
  EXPECT_EQ(f, a);
  EXPECT_EQ(g, a + kMiB);
  EXPECT_EQ(pool.source->allocations, 1);
  EXPECT_EQ(pool.stats().reserved_bytes_peak, int64_t{2 * kMiB});
}

TEST(CachingAllocatorTest, LargeBlocksSplitOnlyWhenTheRestExceedsOneMiB) {
  Pool pool;
  char* a = C(pool.Alloc(20 * kMiB, kS1));
  pool.FreeOk(a);
  char* b = C(pool.Alloc(8 * kMiB, kS1));  // from the cached 20 MiB block; 12 MiB split off
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool.stats().allocated_bytes_current, int64_t{8 * kMiB});
  char* c = C(pool.Alloc(11 * kMiB, kS1));  // from the 12 MiB rest; 1 MiB left: not split
  EXPECT_EQ(c, a + 8 * kMiB);
  EXPECT_EQ(pool.stats().allocated_bytes_current, int64_t{20 * kMiB}) << "c holds the whole 12 MiB";
  EXPECT_EQ(pool.source->allocations, 1);

  char* small = C(pool.Alloc(kKiB, kS1));  // small requests never come from large segments
  EXPECT_TRUE(small < a || small >= a + 20 * kMiB);
  EXPECT_EQ(pool.source->allocations, 2);

  pool.FreeOk(b);
  pool.FreeOk(c);
  char* d = C(pool.Alloc(20 * kMiB, kS1));  // merged back whole
  EXPECT_EQ(d, a);
  EXPECT_EQ(pool.source->allocations, 2);
  pool.FreeOk(d);
  pool.FreeOk(small);
  EXPECT_EQ(pool.stats().allocated_bytes_current, 0);
  EXPECT_EQ(pool.stats().reserved_bytes_current, int64_t{22 * kMiB});
}

TEST(CachingAllocatorTest, SameStreamReusesAtOnceOtherStreamsDoNot) {
  Pool pool;
  void* a = pool.Alloc(64 * kKiB, kS1);
  pool.FreeOk(a);
  EXPECT_EQ(pool.Alloc(64 * kKiB, kS1), a) << "stream order makes reuse on the same stream safe";
  EXPECT_TRUE(pool.events->events.empty()) << "no event needed";
  void* b = pool.Alloc(64 * kKiB, kS2);
  EXPECT_NE(b, a);
  EXPECT_EQ(pool.source->allocations, 2) << "stream 2 gets its own segment";
  // A freed block of stream 1 is not handed to stream 2.
  pool.FreeOk(a);
  void* c = pool.Alloc(64 * kKiB, kS2);
  EXPECT_NE(c, a);
}

TEST(CachingAllocatorTest, BlockUsedOnAnotherStreamWaitsForItsEvent) {
  Pool pool;
  void* a = pool.Alloc(64 * kKiB, kS1);
  ASSERT_TRUE(pool.allocator->RecordStream(a, kS2).ok());
  ASSERT_TRUE(pool.allocator->RecordStream(a, kS1).ok());  // its own stream: nothing to wait for
  pool.FreeOk(a);
  ASSERT_EQ(pool.events->events.size(), 1u);
  EXPECT_EQ(pool.events->events[0].stream, kS2);
  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes_current, 0);
  EXPECT_EQ(s.active_bytes_current, int64_t{64 * kKiB}) << "active until stream 2 is done";

  void* b = pool.Alloc(64 * kKiB, kS1);
  EXPECT_NE(b, a) << "stream 2 may still be using a";
  pool.FreeOk(b);

  pool.events->CompleteAll(kS2);
  EXPECT_EQ(pool.Alloc(64 * kKiB, kS1), a) << "reused once the event completed";
  EXPECT_EQ(pool.events->Unreleased(), 0);
  EXPECT_EQ(pool.stats().active_bytes_current, int64_t{64 * kKiB});
  EXPECT_EQ(pool.stats().allocated_bytes_current, int64_t{64 * kKiB});
}

TEST(CachingAllocatorTest, BlockUsedOnTwoStreamsWaitsForBoth) {
  Pool pool;
  void* a = pool.Alloc(4 * kKiB, kS1);
  ASSERT_TRUE(pool.allocator->RecordStream(a, kS2).ok());
  ASSERT_TRUE(pool.allocator->RecordStream(a, kS3).ok());
  ASSERT_TRUE(pool.allocator->RecordStream(a, kS3).ok());  // once per stream
  pool.FreeOk(a);
  ASSERT_EQ(pool.events->events.size(), 2u);

  pool.events->CompleteAll(kS3);
  void* b = pool.Alloc(4 * kKiB, kS1);
  EXPECT_NE(b, a) << "stream 2 has not finished";
  pool.events->CompleteAll(kS2);
  void* c = pool.Alloc(4 * kKiB, kS1);
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool.events->Unreleased(), 0);
}

TEST(CachingAllocatorTest, SourceFailureEmptiesTheCacheAndRetriesOnce) {
  Pool pool(4 * kMiB);
  void* big = pool.Alloc(4 * kMiB, kS1);
  pool.FreeOk(big);  // cached: the source is full
  void* waiting = nullptr;
  {
    // Nothing for a small request: a new segment is needed, the source says no, the cached
    // 4 MiB go back and the retry succeeds.
    void* p = pool.Alloc(1, kS2);
    ASSERT_NE(p, nullptr);
    waiting = p;
  }
  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.reserved_bytes_current, int64_t{2 * kMiB});
  EXPECT_EQ(s.reserved_bytes_peak, int64_t{4 * kMiB});
  EXPECT_EQ(pool.source->frees, 1);

  // A block awaiting another stream's event is waited for before the cache is emptied.
  ASSERT_TRUE(pool.allocator->RecordStream(waiting, kS3).ok());
  pool.FreeOk(waiting);
  void* large = pool.Alloc(3 * kMiB, kS1);  // needs 4 MiB: only after the small segment goes back
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(pool.events->waits, 1);
  EXPECT_EQ(pool.events->Unreleased(), 0);
  s = pool.stats();
  EXPECT_EQ(s.num_alloc_retries, 2);
  EXPECT_EQ(s.reserved_bytes_current, int64_t{4 * kMiB});
  EXPECT_EQ(s.allocated_bytes_current, int64_t{4 * kMiB});
  EXPECT_EQ(s.active_bytes_current, int64_t{4 * kMiB});
}

TEST(CachingAllocatorTest, OutOfMemoryNamesSizeAllocatedAndReserved) {
  Pool pool(6 * kMiB);
  void* a = pool.Alloc(4 * kMiB, kS1);
  void* b = pool.Alloc(100, kS1);  // a small segment: 6 MiB reserved
  auto c = pool.allocator->Allocate(5 * kMiB, kS1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kResourceExhausted);
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("allocating 5242880 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("4194816 bytes allocated"), std::string::npos) << m;
  EXPECT_NE(m.find("6291456 bytes reserved"), std::string::npos) << m;
  EXPECT_NE(m.find("device 3"), std::string::npos) << m;
  EXPECT_NE(m.find("over capacity"), std::string::npos) << "the source's reason: " << m;
  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(pool.source->failures, 2) << "tried, emptied the cache, tried once more";
  EXPECT_EQ(s.allocated_bytes_current, int64_t{4 * kMiB + 512});

  // The pool still works after an OOM.
  pool.FreeOk(a);
  pool.FreeOk(b);
  EXPECT_TRUE(pool.allocator->Allocate(5 * kMiB, kS1).ok());
  EXPECT_EQ(pool.stats().num_ooms, 1);
}

TEST(CachingAllocatorTest, SourceErrorsOtherThanOutOfMemoryPassThroughWithoutRetry) {
  Pool pool;
  pool.source->fail_next_with_internal = true;
  auto p = pool.allocator->Allocate(kKiB, kS1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kInternal);
  EXPECT_EQ(p.status().message(), "fake source: broken");
  EXPECT_EQ(pool.stats().num_alloc_retries, 0);
  EXPECT_EQ(pool.stats().num_ooms, 0);
  EXPECT_EQ(pool.stats().reserved_bytes_current, 0);
}

TEST(CachingAllocatorTest, HugeRequestIsOutOfMemoryNotOverflow) {
  Pool pool;
  auto p = pool.allocator->Allocate(std::numeric_limits<size_t>::max() - 10, kS1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(pool.stats().num_ooms, 1);
  EXPECT_EQ(pool.source->allocations, 0);
}

TEST(CachingAllocatorTest, ResetPeakStatsRestartsFromCurrent) {
  Pool pool;
  void* a = pool.Alloc(3 * kMiB, kS1);  // 4 MiB segment, not split
  void* b = pool.Alloc(kKiB, kS1);
  pool.FreeOk(a);
  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes_peak, int64_t{4 * kMiB + kKiB});
  EXPECT_EQ(s.active_bytes_peak, int64_t{4 * kMiB + kKiB});
  ASSERT_TRUE(pool.allocator->EmptyCache().ok());
  pool.allocator->ResetPeakStats();
  s = pool.stats();
  EXPECT_EQ(s.allocated_bytes_peak, int64_t{kKiB});
  EXPECT_EQ(s.active_bytes_peak, int64_t{kKiB});
  EXPECT_EQ(s.reserved_bytes_peak, int64_t{2 * kMiB});
  void* c = pool.Alloc(2 * kKiB, kS1);
  s = pool.stats();
  EXPECT_EQ(s.allocated_bytes_peak, int64_t{3 * kKiB});
  EXPECT_EQ(s.reserved_bytes_peak, int64_t{2 * kMiB});
  pool.FreeOk(b);
  pool.FreeOk(c);
  EXPECT_EQ(pool.stats().allocated_bytes_peak, int64_t{3 * kKiB});
}

// Owned bytes: allocated minus the blocks handed off to a transport. A handed-off block stays
// allocated (and active, and its segment reserved) until freed; its bytes leave owned at HandOff
// and are not subtracted again at Free.
TEST(CachingAllocatorTest, HandedOffBlocksLeaveOwnedBytesOnlyOnce) {
  Pool pool;
  void* a = pool.Alloc(1, kS1);           // 512
  void* b = pool.Alloc(3 * kKiB + 1, kS1);  // 3584
  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.owned_bytes_current, 512 + 3584);
  EXPECT_EQ(s.owned_bytes_peak, 512 + 3584);

  ASSERT_TRUE(pool.allocator->HandOff(b).ok());
  s = pool.stats();
  EXPECT_EQ(s.owned_bytes_current, 512);
  EXPECT_EQ(s.owned_bytes_peak, 512 + 3584) << "the peak was reached before the hand-off";
  EXPECT_EQ(s.allocated_bytes_current, 512 + 3584) << "PyTorch's counters are unchanged";
  EXPECT_EQ(s.active_bytes_current, 512 + 3584);

  void* c = pool.Alloc(kKiB, kS1);  // 1024: owned 1536, allocated 5120
  s = pool.stats();
  EXPECT_EQ(s.owned_bytes_current, 512 + 1024);
  EXPECT_EQ(s.allocated_bytes_current, 512 + 3584 + 1024);
  EXPECT_EQ(s.allocated_bytes_peak, 512 + 3584 + 1024);
  EXPECT_EQ(s.owned_bytes_peak, 512 + 3584) << "the held block does not add to the owned peak";

  pool.FreeOk(b);  // the transport lets go: owned unchanged
  s = pool.stats();
  EXPECT_EQ(s.owned_bytes_current, 512 + 1024);
  EXPECT_EQ(s.allocated_bytes_current, 512 + 1024);

  pool.FreeOk(a);
  pool.FreeOk(c);
  s = pool.stats();
  EXPECT_EQ(s.owned_bytes_current, 0);
  EXPECT_EQ(s.allocated_bytes_current, 0);

  // A reused block is owned again, and can be handed off again.
  void* d = pool.Alloc(3 * kKiB + 1, kS1);
  EXPECT_EQ(d, a) << "the segment merged back whole: its first bytes";
  EXPECT_EQ(pool.stats().owned_bytes_current, 3584);
  ASSERT_TRUE(pool.allocator->HandOff(d).ok());
  EXPECT_EQ(pool.stats().owned_bytes_current, 0);
  pool.FreeOk(d);
  EXPECT_EQ(pool.stats().owned_bytes_current, 0);
}

TEST(CachingAllocatorTest, HandedOffBlockUsedOnAnotherStreamStillWaitsForItsEvent) {
  Pool pool;
  void* a = pool.Alloc(kKiB, kS1);
  ASSERT_TRUE(pool.allocator->RecordStream(a, kS2).ok());
  ASSERT_TRUE(pool.allocator->HandOff(a).ok());
  pool.FreeOk(a);
  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.owned_bytes_current, 0);
  EXPECT_EQ(s.allocated_bytes_current, 0);
  EXPECT_EQ(s.active_bytes_current, int64_t{kKiB}) << "awaiting stream 2's event";
  EXPECT_NE(pool.Alloc(kKiB, kS1), a);
  pool.events->CompleteAll(kS2);
  EXPECT_EQ(pool.stats().owned_bytes_current, int64_t{kKiB}) << "only the new block";
}

TEST(CachingAllocatorTest, OwnedPeakRestartsFromCurrent) {
  Pool pool;
  void* a = pool.Alloc(4 * kKiB, kS1);
  void* b = pool.Alloc(kKiB, kS1);
  ASSERT_TRUE(pool.allocator->HandOff(a).ok());
  pool.allocator->ResetPeakStats();
  CachingAllocatorStats s = pool.stats();
  EXPECT_EQ(s.owned_bytes_peak, int64_t{kKiB});
  EXPECT_EQ(s.allocated_bytes_peak, int64_t{5 * kKiB});
  void* c = pool.Alloc(2 * kKiB, kS1);
  pool.FreeOk(a);
  pool.FreeOk(c);
  s = pool.stats();
  EXPECT_EQ(s.owned_bytes_peak, int64_t{3 * kKiB});
  EXPECT_EQ(s.allocated_bytes_peak, int64_t{7 * kKiB});
  pool.FreeOk(b);
}

TEST(CachingAllocatorTest, HandOffOfUnknownOrHandedOffPointersIsInternal) {
  Pool pool;
  char* a = C(pool.Alloc(kKiB, kS1));
  Status s = pool.allocator->HandOff(a + 512);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("HandOff of 0x"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not an allocated block"), std::string::npos) << s.message();
  ASSERT_TRUE(pool.allocator->HandOff(a).ok());
  s = pool.allocator->HandOff(a);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("handed off already"), std::string::npos) << s.message();
  EXPECT_EQ(pool.stats().owned_bytes_current, 0) << "subtracted once";
  pool.FreeOk(a);
  EXPECT_EQ(pool.allocator->HandOff(a).code(), Code::kInternal) << "a freed block";
  EXPECT_EQ(pool.stats().owned_bytes_current, 0);
}

// What a transport calls: the tensor's own allocator is told, only when the transport's handle
// is the storage's last one.
TEST(CachingAllocatorTest, TensorHandsOffOnlyItsLastHandle) {
  Pool pool;
  auto t = Tensor::Empty(*pool.allocator, TensorSpec{DType::kF32, {256}});  // 1 KiB
  ASSERT_TRUE(t.ok());
  {
    Tensor view = *t->Reshaped({16, 16});
    ASSERT_TRUE(view.HandOffToTransport().ok());
    EXPECT_EQ(pool.stats().owned_bytes_current, int64_t{kKiB}) << "the sender still holds it";
  }
  ASSERT_TRUE(t->HandOffToTransport().ok());
  EXPECT_EQ(pool.stats().owned_bytes_current, 0);
  EXPECT_EQ(pool.stats().allocated_bytes_current, int64_t{kKiB});
  EXPECT_EQ(t->HandOffToTransport().code(), Code::kInternal) << "handed off already";
  *t = Tensor();
  EXPECT_EQ(pool.stats().allocated_bytes_current, 0);
  EXPECT_EQ(pool.stats().owned_bytes_current, 0);
  EXPECT_TRUE(Tensor::FromVector(std::vector<float>{1, 2}).HandOffToTransport().ok()) << "no allocator";
}

TEST(CachingAllocatorTest, ZeroBytesIsNullAndFreeingNullIsANoOp) {
  Pool pool;
  auto p = pool.allocator->Allocate(0, kS1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, nullptr);
  EXPECT_TRUE(pool.allocator->Free(nullptr).ok());
  EXPECT_EQ(pool.source->allocations, 0);
  EXPECT_EQ(pool.stats().allocated_bytes_current, 0);
}

TEST(CachingAllocatorTest, UnknownPointersAreErrors) {
  Pool pool;
  char* a = C(pool.Alloc(kKiB, kS1));
  Status s = pool.allocator->Free(a + 512);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("not an allocated block"), std::string::npos) << s.message();
  EXPECT_EQ(pool.allocator->RecordStream(a + 512, kS2).code(), Code::kInternal);
  pool.FreeOk(a);
  EXPECT_EQ(pool.allocator->Free(a).code(), Code::kInternal) << "a double free";
  EXPECT_EQ(pool.stats().allocated_bytes_current, 0);
}

TEST(CachingAllocatorTest, FailedEventRecordKeepsTheBlockOutOfUse) {
  Pool pool;
  void* a = pool.Alloc(kKiB, kS1);
  ASSERT_TRUE(pool.allocator->RecordStream(a, kS2).ok());
  pool.events->fail_records = true;
  Status s = pool.allocator->Free(a);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("recording an event on stream 2"), std::string::npos) << s.message();
  pool.events->fail_records = false;
  EXPECT_NE(pool.Alloc(kKiB, kS1), a) << "nobody knows when stream 2 is done with it";
  ASSERT_TRUE(pool.allocator->EmptyCache().ok());
  EXPECT_EQ(pool.stats().reserved_bytes_current, int64_t{2 * kMiB}) << "its segment stays";
}

TEST(CachingAllocatorTest, TensorsUseTheDefaultStream) {
  Pool pool(1024 * kMiB, /*default_stream=*/kS2);
  EXPECT_EQ(pool.allocator->kind(), MemoryKind::kCuda);
  EXPECT_EQ(pool.allocator->device(), 3);
  void* first = nullptr;
  {
    auto t = Tensor::Empty(*pool.allocator, TensorSpec{DType::kF32, {256, 1024}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->memory(), MemoryKind::kCuda);
    EXPECT_EQ(t->device(), 3);
    first = t->data();
    EXPECT_EQ(pool.stats().allocated_bytes_current, int64_t{kMiB});
    auto segments = pool.allocator->Snapshot();
    ASSERT_EQ(segments.size(), 1u);
    EXPECT_EQ(segments[0].stream, kS2);
    EXPECT_EQ(segments[0].blocks[0].requested, kMiB);
  }
  EXPECT_EQ(pool.stats().allocated_bytes_current, 0) << "the last handle gave it back";
  EXPECT_EQ(pool.Alloc(kMiB, kS2), first) << "cached on the default stream";

  auto empty = Tensor::Empty(*pool.allocator, TensorSpec{DType::kF32, {0}});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
}

TEST(CachingAllocatorTest, DeallocateErrorsSurfaceAtTheNextAllocate) {
  Pool pool;
  auto p = pool.allocator->Allocate(1000);
  ASSERT_TRUE(p.ok());
  pool.allocator->Deallocate(*p, 999);  // not the size it was allocated with
  auto q = pool.allocator->Allocate(1000);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kInternal);
  EXPECT_NE(q.status().message().find("with 999 bytes; it was allocated with 1000"), std::string::npos)
      << q.status().message();
  EXPECT_EQ(pool.stats().allocated_bytes_current, 0) << "the block was freed all the same";
}

TEST(CachingAllocatorTest, DestructionReturnsFreeSegmentsAndEvents) {
  auto source = std::make_unique<FakeSource>(1024 * kMiB);
  auto events = std::make_unique<FakeEvents>();
  FakeSource* src = source.get();
  FakeEvents* ev = events.get();
  // The fakes die with the allocator; copy what the test needs to see first.
  int frees = 0;
  size_t held_after = 1;
  int unreleased = -1;
  struct Spy final : public RawMemorySource {
    Spy(FakeSource* s, int* frees, size_t* held) : s(s), frees(frees), held(held) {}
    Result<void*> Allocate(size_t b) override { return s->Allocate(b); }
    Status Free(void* p) override {
      Status st = s->Free(p);
      *frees = s->frees;
      *held = s->held_bytes;
      return st;
    }
    FakeSource* s;
    int* frees;
    size_t* held;
  };
  struct EventSpy final : public StreamEvents {
    EventSpy(FakeEvents* e, int* unreleased) : e(e), unreleased(unreleased) {}
    Result<Event> Record(StreamId s) override { return e->Record(s); }
    Result<bool> IsComplete(Event x) override { return e->IsComplete(x); }
    Status Wait(Event x) override { return e->Wait(x); }
    void Release(Event x) override {
      e->Release(x);
      *unreleased = e->Unreleased();
    }
    FakeEvents* e;
    int* unreleased;
  };
  {
    CachingAllocator allocator(std::make_unique<Spy>(src, &frees, &held_after),
                               std::make_unique<EventSpy>(ev, &unreleased), CachingAllocator::Options{});
    auto a = allocator.Allocate(kKiB, kS1);
    auto b = allocator.Allocate(5 * kMiB, kS2);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(allocator.RecordStream(*b, kS3).ok());
    ASSERT_TRUE(allocator.Free(*a).ok());
    ASSERT_TRUE(allocator.Free(*b).ok());
  }
  EXPECT_EQ(frees, 2);
  EXPECT_EQ(held_after, 0u);
  EXPECT_EQ(unreleased, 0);
}

TEST(CachingAllocatorTest, ThreadsAllocateConcurrently) {
  Pool pool;
  std::vector<std::thread> threads;
  for (StreamId stream = 1; stream <= 4; ++stream) {
    threads.emplace_back([&pool, stream] {
      std::mt19937 rng(static_cast<unsigned>(stream));
      std::vector<void*> mine;
      for (int i = 0; i < 500; ++i) {
        if (mine.empty() || rng() % 2) {
          auto p = pool.allocator->Allocate(1 + rng() % (3 * kMiB), stream);
          if (p.ok()) mine.push_back(*p);
        } else {
          ASSERT_TRUE(pool.allocator->Free(mine.back()).ok());
          mine.pop_back();
        }
      }
      for (void* p : mine) ASSERT_TRUE(pool.allocator->Free(p).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.stats().allocated_bytes_current, 0);
  EXPECT_EQ(pool.stats().active_bytes_current, 0);
  EXPECT_EQ(pool.stats().reserved_bytes_current, static_cast<int64_t>(pool.source->held_bytes));
}

// A random sequence of allocations, frees, cross-stream uses, event completions and cache
// flushes on a source small enough to hit retries and OOMs, checked after every step against a
// model kept by the test: no live block overlaps another or a block still awaiting its events,
// every block's bytes survive untouched until it is freed, the snapshot tiles each segment, and
// each stat equals the model's sum (reserved: what the source holds; peaks: the model's maxima).
TEST(CachingAllocatorTest, RandomSequenceMatchesAModel) {
  for (unsigned seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Pool pool(48 * kMiB);
    std::mt19937_64 rng(seed);
    struct Live {
      size_t requested;
      size_t size;  // the block's, from the snapshot when it was handed out
      StreamId stream;
      std::set<StreamId> others;
      uint8_t mark;
    };
    struct Awaiting {
      size_t size;
      std::vector<size_t> events;  // fake event ids
    };
    std::map<char*, Live> live;
    std::map<char*, Awaiting> awaiting;
    int64_t allocated_peak = 0, reserved_peak = 0, active_peak = 0;
    int ooms = 0;
    uint8_t next_mark = 1;

    auto sum_live = [&] {
      int64_t n = 0;
      for (auto& [p, l] : live) n += static_cast<int64_t>(l.size);
      return n;
    };
    auto sum_awaiting = [&] {
      int64_t n = 0;
      for (auto& [p, a] : awaiting) n += static_cast<int64_t>(a.size);
      return n;
    };
    // What the allocator does at each Allocate and EmptyCache: a block whose events all
    // completed is free again.
    auto drop_completed = [&] {
      for (auto it = awaiting.begin(); it != awaiting.end();) {
        bool done = std::all_of(it->second.events.begin(), it->second.events.end(),
                                [&](size_t e) { return pool.events->events[e].complete; });
        it = done ? awaiting.erase(it) : std::next(it);
      }
    };
    auto block_of = [&](char* p) {
      for (const auto& seg : pool.allocator->Snapshot()) {
        for (const auto& b : seg.blocks) {
          if (b.address == reinterpret_cast<std::uintptr_t>(p)) return b;
        }
      }
      ADD_FAILURE() << "no block at the address handed out";
      return CachingAllocatorSegment::Block{};
    };
    // Marks a few bytes at each end of the request (all of it when small).
    auto fill = [](char* p, size_t n, uint8_t mark) {
      const size_t edge = std::min<size_t>(n, 4096);
      std::memset(p, mark, edge);
      std::memset(p + n - edge, mark, edge);
    };
    auto intact = [](char* p, size_t n, uint8_t mark) {
      const size_t edge = std::min<size_t>(n, 4096);
      for (size_t i = 0; i < edge; ++i) {
        if (static_cast<uint8_t>(p[i]) != mark || static_cast<uint8_t>(p[n - 1 - i]) != mark) return false;
      }
      return true;
    };
    auto random_live = [&]() -> std::map<char*, Live>::iterator {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      return it;
    };

    for (int step = 0; step < 3000; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const int op = static_cast<int>(rng() % 100);
      const StreamId stream = 1 + rng() % 3;
      if (op < 40 || live.empty()) {
        // Mostly small requests, some large ones up to 10 MiB.
        const size_t bytes = rng() % 4 == 0 ? 1 + rng() % (10 * kMiB) : 1 + rng() % (64 * kKiB);
        const int failures_before = pool.source->failures;
        auto p = pool.allocator->Allocate(bytes, stream);
        drop_completed();
        if (!p.ok()) {
          ASSERT_EQ(p.status().code(), Code::kResourceExhausted) << p.status().ToString();
          ++ooms;
          EXPECT_EQ(pool.source->failures, failures_before + 2);
          const size_t rounded = (bytes + 511) / 512 * 512;
          const size_t segment = rounded <= kMiB ? 2 * kMiB : (rounded + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
          EXPECT_GT(pool.source->held_bytes + segment, pool.source->capacity) << "an OOM the source could serve";
        } else {
          char* q = C(*p);
          for (auto& [o, l] : live) {
            ASSERT_TRUE(q + bytes <= o || o + l.requested <= q) << "overlaps a live block";
          }
          for (auto& [o, a] : awaiting) {
            ASSERT_TRUE(q + bytes <= o || o + a.size <= q) << "reuses a block before its events completed";
          }
          auto block = block_of(q);
          EXPECT_EQ(block.state, CachingAllocatorSegment::BlockState::kAllocated);
          EXPECT_EQ(block.requested, bytes);
          EXPECT_GE(block.size, (bytes + 511) / 512 * 512);
          EXPECT_EQ(block.size % 512, 0u);
          const uint8_t mark = next_mark;
          next_mark = next_mark == 255 ? 1 : next_mark + 1;
          fill(q, bytes, mark);
          live[q] = Live{bytes, block.size, stream, {}, mark};
        }
      } else if (op < 80) {
        auto it = random_live();
        EXPECT_TRUE(intact(it->first, it->second.requested, it->second.mark)) << "another block wrote into it";
        const size_t events_before = pool.events->events.size();
        ASSERT_TRUE(pool.allocator->Free(it->first).ok());
        const size_t recorded = pool.events->events.size() - events_before;
        EXPECT_EQ(recorded, it->second.others.size()) << "one event per other stream";
        if (recorded > 0) {
          Awaiting a{it->second.size, {}};
          for (size_t e = events_before; e < pool.events->events.size(); ++e) a.events.push_back(e);
          awaiting[it->first] = a;
        }
        live.erase(it);
      } else if (op < 90) {
        auto it = random_live();
        ASSERT_TRUE(pool.allocator->RecordStream(it->first, stream).ok());
        if (stream != it->second.stream) it->second.others.insert(stream);
      } else if (op < 98) {
        pool.events->CompleteOldest(stream);
      } else {
        ASSERT_TRUE(pool.allocator->EmptyCache().ok());
        drop_completed();
        EXPECT_TRUE(awaiting.empty()) << "EmptyCache waits for every event";
      }

      const CachingAllocatorStats s = pool.stats();
      allocated_peak = std::max(allocated_peak, sum_live());
      active_peak = std::max(active_peak, sum_live() + sum_awaiting());
      reserved_peak = std::max(reserved_peak, static_cast<int64_t>(pool.source->held_bytes));
      ASSERT_EQ(s.allocated_bytes_current, sum_live());
      ASSERT_EQ(s.active_bytes_current, sum_live() + sum_awaiting());
      ASSERT_EQ(s.reserved_bytes_current, static_cast<int64_t>(pool.source->held_bytes));
      ASSERT_EQ(s.allocated_bytes_peak, allocated_peak);
      ASSERT_EQ(s.active_bytes_peak, active_peak);
      ASSERT_EQ(s.reserved_bytes_peak, reserved_peak);
      ASSERT_EQ(s.num_ooms, ooms);
      ASSERT_EQ(s.num_alloc_retries + s.num_ooms, pool.source->failures) << "one retry per failure, two per OOM";
      if (step % 500 == 250) {
        pool.allocator->ResetPeakStats();
        allocated_peak = sum_live();
        active_peak = sum_live() + sum_awaiting();
        reserved_peak = static_cast<int64_t>(pool.source->held_bytes);
      }

      if (step % 50 == 0) {
        // The snapshot tiles every segment, segments are what the source handed out, and its
        // allocated and awaiting blocks are exactly the model's.
        size_t allocated_blocks = 0, awaiting_blocks = 0;
        auto segments = pool.allocator->Snapshot();
        ASSERT_EQ(segments.size(), pool.source->held.size());
        for (const auto& seg : segments) {
          auto held = pool.source->held.find(reinterpret_cast<void*>(seg.address));
          ASSERT_NE(held, pool.source->held.end());
          EXPECT_EQ(held->second, seg.size);
          std::uintptr_t at = seg.address;
          bool previous_free = false;
          for (const auto& b : seg.blocks) {
            EXPECT_EQ(b.address, at);
            at += b.size;
            const bool is_free = b.state == CachingAllocatorSegment::BlockState::kFree;
            EXPECT_FALSE(is_free && previous_free) << "free neighbours not merged";
            previous_free = is_free;
            char* p = reinterpret_cast<char*>(b.address);
            if (b.state == CachingAllocatorSegment::BlockState::kAllocated) {
              ++allocated_blocks;
              EXPECT_EQ(live.count(p), 1u);
            } else if (b.state == CachingAllocatorSegment::BlockState::kAwaitingEvents) {
              ++awaiting_blocks;
              EXPECT_EQ(awaiting.count(p), 1u);
            }
          }
          EXPECT_EQ(at, seg.address + seg.size);
        }
        EXPECT_EQ(allocated_blocks, live.size());
        EXPECT_EQ(awaiting_blocks, awaiting.size());
      }
    }
    EXPECT_GT(pool.stats().num_alloc_retries, 0) << "the sequence should reach the source's limit";
    for (auto& [p, l] : live) ASSERT_TRUE(pool.allocator->Free(p).ok());
    ASSERT_TRUE(pool.allocator->EmptyCache().ok());
    EXPECT_EQ(pool.stats().allocated_bytes_current, 0);
    EXPECT_EQ(pool.stats().active_bytes_current, 0);
    EXPECT_EQ(pool.stats().reserved_bytes_current, 0);
    EXPECT_EQ(pool.source->held_bytes, 0u);
    EXPECT_EQ(pool.events->Unreleased(), 0);
  }
}

}  // namespace
}  // namespace pipecoord::kernels
