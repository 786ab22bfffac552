// The job's choice of transport on hand-made cards (no GPU): every rank must reach the same
// answer from the same cards, NCCL only when no two ranks that exchange tensors share a GPU; the
// cards survive their text form; and the exchange over a rendezvous gives every rank the same
// cards, in rank order.
#include "worker/transport/transport_choice.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>

#include "worker/transport/local_rendezvous.h"

namespace pipecoord::worker {
namespace {

using std::chrono::milliseconds;

// A GPU of host `host` whose UUID is 16 times `tag`, at PCI bus `bus` (default: one per tag).
nccl_wire::DeviceIdentity Gpu(char tag, const std::string& bus = "", const std::string& host = "node-a") {
  nccl_wire::DeviceIdentity d;
  d.host = host;
  d.pci_bus_id = !bus.empty() ? bus : "0000:" + std::to_string(static_cast<unsigned char>(tag)) + ":00.0";
  d.uuid = std::string(16, tag);
  d.device = 0;
  return d;
}

RankCard Card(int rank, std::vector<int> peers, nccl_wire::DeviceIdentity device) {
  RankCard c;
  c.rank = rank;
  c.peers = std::move(peers);
  c.device = std::move(device);
  return c;
}

TEST(TransportChoiceTest, TwoPipelineRanksOnOneGpuStageNamingTheRanksAndTheGpu) {
  nccl_wire::DeviceIdentity gpu = Gpu('\0', "0000:65:00.0");
  gpu.uuid = std::string("\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff", 16);
  const TransportChoice c = ChooseTransport({Card(0, {1}, gpu), Card(1, {0}, gpu)});
  EXPECT_FALSE(c.nccl);
  EXPECT_EQ(c.why,
            "ranks 0 and 1 share GPU-00112233-4455-6677-8899-aabbccddeeff (PCI 0000:65:00.0): NCCL refuses two ranks "
            "on one device; boundary tensors staged through the host");
}

TEST(TransportChoiceTest, EveryRankOnItsOwnGpuUsesNccl) {
  const TransportChoice c = ChooseTransport({Card(0, {1}, Gpu('a')), Card(1, {0, 2}, Gpu('b')), Card(2, {1}, Gpu('c'))});
  EXPECT_TRUE(c.nccl);
  EXPECT_EQ(c.why, "every rank on its own GPU: NCCL");
}

TEST(TransportChoiceTest, TheSameBusOnTheSameHostIsOneGpuEvenWithoutUuids) {
  nccl_wire::DeviceIdentity a = Gpu('a', "0000:65:00.0"), b = Gpu('b', "0000:65:00.0");
  a.uuid.clear();
  b.uuid.clear();
  EXPECT_FALSE(ChooseTransport({Card(0, {1}, a), Card(1, {0}, b)}).nccl);
  b.host = "node-b";  // the same bus on another machine: another GPU
  EXPECT_TRUE(ChooseTransport({Card(0, {1}, a), Card(1, {0}, b)}).nccl);
}

// pp 2 x dp 2: ranks 0 and 1 (replica 0) on two GPUs, ranks 2 and 3 (replica 1) on one. Rank 0
// alone would see only distinct GPUs among its peers (1 and 2); the job must still stage on every
// rank, or rank 0 would wait in NCCL's Connect for peers that staged.
TEST(TransportChoiceTest, OneSharedPairAnywhereStagesTheWholeJob) {
  const std::vector<RankCard> cards = {Card(0, {1, 2}, Gpu('a')), Card(1, {0, 3}, Gpu('b')), Card(2, {3, 0}, Gpu('c')),
                                       Card(3, {2, 1}, Gpu('c'))};
  const TransportChoice c = ChooseTransport(cards);
  EXPECT_FALSE(c.nccl);
  EXPECT_EQ(c.why.rfind("ranks 2 and 3 share GPU-63636363-", 0), 0u) << c.why;
  // The answer does not depend on the order the cards come in.
  std::vector<RankCard> shuffled = cards;
  std::mt19937 rng(7);
  for (int i = 0; i < 10; ++i) {
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const TransportChoice again = ChooseTransport(shuffled);
    EXPECT_EQ(again.nccl, c.nccl);
    EXPECT_EQ(again.why, c.why);
  }
}

TEST(TransportChoiceTest, SeveralSharedPairsAreCounted) {
  const TransportChoice c = ChooseTransport(
      {Card(0, {1}, Gpu('a')), Card(1, {0, 2}, Gpu('a')), Card(2, {1, 3}, Gpu('a')), Card(3, {2}, Gpu('b'))});
  EXPECT_FALSE(c.nccl);
  EXPECT_NE(c.why.find("ranks 0 and 1 share GPU-61616161-"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("(2 pairs that exchange tensors share a GPU)"), std::string::npos) << c.why;
}

TEST(TransportChoiceTest, RanksThatShareAGpuButExchangeNothingKeepNccl) {
  // A pipeline pair listing each other (one-sided lists count too: rank 3 does not list rank 2).
  const TransportChoice c =
      ChooseTransport({Card(0, {1}, Gpu('a')), Card(1, {0}, Gpu('b')), Card(2, {3}, Gpu('a')), Card(3, {}, Gpu('c'))});
  EXPECT_TRUE(c.nccl);
  EXPECT_EQ(c.why, "no two ranks that exchange tensors share a GPU (ranks 0 and 2 share one but exchange nothing): NCCL");
  // Rank 3 lists nobody, but rank 2 lists it: the pair (2, 3) exchanges tensors.
  EXPECT_FALSE(ChooseTransport({Card(2, {3}, Gpu('a')), Card(3, {}, Gpu('a'))}).nccl);
}

TEST(TransportChoiceTest, ARankWithoutItsGpuStages) {
  RankCard lost;
  lost.rank = 1;
  lost.peers = {0};
  lost.problem = "no CUDA device: cudaErrorNoDevice";
  const TransportChoice c = ChooseTransport({Card(0, {1}, Gpu('a')), lost});
  EXPECT_FALSE(c.nccl);
  EXPECT_EQ(c.why,
            "rank 1 could not name its GPU (no CUDA device: cudaErrorNoDevice): NCCL needs every GPU named; boundary "
            "tensors staged through the host");
  // A peer with no card at all.
  const TransportChoice missing = ChooseTransport({Card(0, {1}, Gpu('a'))});
  EXPECT_FALSE(missing.nccl);
  EXPECT_EQ(missing.why, "rank 1 exchanges tensors but published no card: boundary tensors staged through the host");
}

TEST(TransportChoiceTest, NothingExchangedStages) {
  const TransportChoice c = ChooseTransport({Card(0, {}, Gpu('a'))});
  EXPECT_FALSE(c.nccl);
  EXPECT_EQ(c.why, "no two ranks exchange tensors: nothing travels between ranks (staged, unused)");
}

TEST(TransportChoiceTest, CardsRoundTripThroughTheirText) {
  RankCard lost;
  lost.rank = 12;
  lost.problem = "line one\nline two = x";
  nccl_wire::DeviceIdentity odd = Gpu('\n', "0000:01:00.0", "host=with\nnewline");
  odd.device = 3;
  for (const RankCard& c : {Card(0, {1}, Gpu('a')), Card(7, {3, 11, 6}, odd), lost}) {
    auto back = DecodeRankCard(EncodeRankCard(c));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, c);
  }
  EXPECT_EQ(RankCardKey(42, 3), "pipecoord/transport/session-42/rank-3");
}

TEST(TransportChoiceTest, WhatIsNotACardIsRefused) {
  auto not_card = DecodeRankCard("pipecoord-nccl-card v1\nhost=00\n");
  ASSERT_FALSE(not_card.ok());
  EXPECT_EQ(not_card.status().code(), Code::kInternal);
  EXPECT_EQ(not_card.status().message().rfind("transport card: does not start with", 0), 0u)
      << not_card.status().ToString();
  std::string text = EncodeRankCard(Card(1, {0}, Gpu('a')));
  text.replace(text.find("peers=0"), 7, "peers=x");
  auto bad_peer = DecodeRankCard(text);
  ASSERT_FALSE(bad_peer.ok());
  EXPECT_EQ(bad_peer.status().message(), "transport card: peer \"x\" in \"x\"");
  RankCard neither;
  neither.rank = 0;
  auto empty = DecodeRankCard(EncodeRankCard(neither));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "transport card: names neither a GPU nor a problem");
}

// Four ranks in four threads, publishing in any order: each gets every card, in rank order,
// and so the same choice.
TEST(TransportChoiceTest, TheExchangeGivesEveryRankTheSameCards) {
  LocalRendezvous rendezvous(milliseconds(10000));
  const std::vector<RankCard> mine = {Card(0, {1, 2}, Gpu('a')), Card(1, {0, 3}, Gpu('b')), Card(2, {3, 0}, Gpu('c')),
                                      Card(3, {2, 1}, Gpu('c'))};
  std::vector<Result<std::vector<RankCard>>> got(4, Unavailable("not run"));
  std::vector<std::thread> threads;
  for (int r : {3, 1, 0, 2}) {
    threads.emplace_back([&, r] { got[r] = ExchangeRankCards(mine[r], 4, 9, rendezvous.Fn(), milliseconds(10000)); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(got[r].ok()) << "rank " << r << ": " << got[r].status().ToString();
    EXPECT_EQ(*got[r], mine) << "rank " << r;
    EXPECT_FALSE(ChooseTransport(*got[r]).nccl);
  }
}

TEST(TransportChoiceTest, TheExchangeFailsNamingTheCardThatNeverCame) {
  LocalRendezvous impatient(milliseconds(100));
  auto got = ExchangeRankCards(Card(0, {1}, Gpu('a')), 2, 5, impatient.Fn(), milliseconds(10000));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable);
  EXPECT_EQ(got.status().message().rfind("waiting for pipecoord/transport/session-5/rank-1: rendezvous: nothing was "
                                         "published under pipecoord/transport/session-5/rank-1",
                                         0),
            0u)
      << got.status().ToString();

  // A card filed under another rank's key.
  LocalRendezvous rendezvous(milliseconds(1000));
  ASSERT_TRUE(rendezvous.Call(RankCardKey(5, 1), EncodeRankCard(Card(4, {0}, Gpu('b')))).ok());
  auto wrong = ExchangeRankCards(Card(0, {1}, Gpu('a')), 2, 5, rendezvous.Fn(), milliseconds(1000));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Code::kInternal);
  EXPECT_EQ(wrong.status().message(), "pipecoord/transport/session-5/rank-1: the card is rank 4's");

  auto outside = ExchangeRankCards(Card(2, {1}, Gpu('a')), 2, 5, rendezvous.Fn(), milliseconds(1000));
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::worker
