// StreamWakeups: a notified key wakes its subscribers and nobody else, on the one wakeup thread;
// a callback may re-enter the caller's lock and unsubscribe; Unsubscribe from another thread waits
// for a call in progress, and nothing is called after it returns.
#include "coordinator/stream_wakeups.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace pipecoord::coordinator {
namespace {

using namespace std::chrono_literals;

// Spins (bounded) until `done`.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 2000 && !done(); ++i) std::this_thread::sleep_for(1ms);
  return done();
}

TEST(StreamWakeups, ANotifiedKeyWakesItsSubscribersOnlyOnOneThread) {
  StreamWakeups w;
  std::atomic<int> a{0}, b{0}, c{0};
  std::atomic<std::thread::id> thread_a, thread_b;
  w.Subscribe("worker/a", [&] { thread_a = std::this_thread::get_id(); ++a; });
  w.Subscribe("worker/a", [&] { ++c; });  // a second stream on the same key
  w.Subscribe("worker/b", [&] { thread_b = std::this_thread::get_id(); ++b; });
  w.Notify("worker/a");
  ASSERT_TRUE(Eventually([&] { return a == 1 && c == 1; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(b, 0);  // nobody else woke
  w.Notify("worker/b");
  ASSERT_TRUE(Eventually([&] { return b == 1; }));
  EXPECT_EQ(thread_a.load(), thread_b.load());
  EXPECT_NE(thread_a.load(), std::this_thread::get_id());
  w.Notify("nobody");  // no subscriber: nothing queued
  w.NotifyAll();
  ASSERT_TRUE(Eventually([&] { return a == 2 && b == 2 && c == 2; }));
  EXPECT_EQ(w.subscriptions(), 3u);
  EXPECT_EQ(w.wakeups(), 6);
}

TEST(StreamWakeups, NotificationsOfOneKeyCoalesceButNeverGetLost) {
  StreamWakeups w;
  std::atomic<int> calls{0};
  std::atomic<int> seen{0};
  std::atomic<int> produced{0};
  w.Subscribe("job/1", [&] {
    ++calls;
    seen = produced.load();  // reads the state, as a stream does
  });
  for (int i = 1; i <= 1000; ++i) {
    produced = i;
    w.Notify("job/1");
  }
  // However many calls, the last one saw the last state.
  ASSERT_TRUE(Eventually([&] { return seen == 1000; }));
  EXPECT_GE(calls, 1);
  EXPECT_LE(calls, 1000);
}

TEST(StreamWakeups, UnsubscribeWaitsForACallInProgressAndStopsCalls) {
  StreamWakeups w;
  std::atomic<bool> inside{false}, release{false};
  std::atomic<int> calls{0};
  const uint64_t token = w.Subscribe("k", [&] {
    ++calls;
    inside = true;
    while (!release) std::this_thread::sleep_for(1ms);
    inside = false;
  });
  w.Notify("k");
  ASSERT_TRUE(Eventually([&] { return inside.load(); }));
  std::atomic<bool> returned{false};
  std::thread t([&] {
    w.Unsubscribe(token);
    returned = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(returned);  // the call is still running
  release = true;
  t.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(inside);
  w.Notify("k");
  w.NotifyAll();
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(w.subscriptions(), 0u);
}

TEST(StreamWakeups, ACallbackMayUnsubscribeItselfAndOthers) {
  StreamWakeups w;
  std::atomic<int> first{0}, second{0};
  uint64_t other = 0, self = 0;
  other = w.Subscribe("k", [&] { ++second; });
  self = w.Subscribe("k", [&] {
    ++first;
    w.Unsubscribe(self);   // on the wakeup thread: does not wait for itself
    w.Unsubscribe(other);  // the other one is not called in this round either
  });
  w.Notify("k");
  ASSERT_TRUE(Eventually([&] { return first == 1; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(w.subscriptions(), 0u);
  EXPECT_LE(second, 1);  // called before `self` in token order, or not at all
  w.NotifyAll();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(first, 1);
}

}  // namespace
}  // namespace pipecoord::coordinator
