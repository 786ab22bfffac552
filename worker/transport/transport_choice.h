// Which transport a job's device tensors travel by, decided the same way on every rank.
//
// NCCL (nccl_transport.h) is the fast path between GPUs, but it refuses two ranks of one
// communicator on one GPU, and a job whose ranks pick different transports cannot talk at all:
// a rank on NCCL waits in Connect for a peer that staged. So every rank publishes a card (its
// global rank, its GPU, the ranks it exchanges tensors with) under the job's rendezvous, reads
// every other rank's card, and runs the same pure decision over the same cards:
//   NCCL for the whole job when every rank named its GPU and no two ranks that exchange tensors
//   share one; otherwise every rank stages its tensors through the host (staged_transport.h).
//
//   RankCard mine{global, peers, LocalDeviceIdentity(device)};
//   auto cards = ExchangeRankCards(mine, world, session, rendezvous, timeout);
//   TransportChoice choice = ChooseTransport(*cards);   // identical on every rank
//
// Pure (no CUDA): the GPU's identity comes from the caller.
#ifndef PIPECOORD_WORKER_TRANSPORT_TRANSPORT_CHOICE_H_
#define PIPECOORD_WORKER_TRANSPORT_TRANSPORT_CHOICE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/transport/nccl_wire.h"
#include "worker/transport/rendezvous.h"

namespace pipecoord::worker {

// What one rank publishes.
struct RankCard {
  int rank = -1;           // global rank
  std::vector<int> peers;  // the global ranks it exchanges tensors with (pipeline and all-reduce)
  // Its GPU as NCCL tells GPUs apart; absent when the rank could not name it, with the reason
  // in `problem` (the job then stages: NCCL needs every GPU named).
  std::optional<nccl_wire::DeviceIdentity> device;
  std::string problem;
  friend bool operator==(const RankCard&, const RankCard&) = default;
};

// "pipecoord/transport/session-<session>/rank-<rank>"
std::string RankCardKey(uint64_t session, int rank);
std::string EncodeRankCard(const RankCard& card);
// INTERNAL naming what is wrong (a rank of another build, or a value that is not a card).
Result<RankCard> DecodeRankCard(const std::string& text);

struct TransportChoice {
  bool nccl = false;
  // One line for the worker's log: which path and why, e.g. "ranks 0 and 1 share GPU
  // GPU-5a1b...: NCCL refuses two ranks on one device; boundary tensors staged through the host"
  // or "every rank on its own GPU: NCCL".
  std::string why;
};

// The decision over every rank's card (in any order; one card per rank). A pair exchanges
// tensors when either lists the other. No pair at all (one rank, or ranks that exchange nothing):
// staged, as nothing travels.
TransportChoice ChooseTransport(const std::vector<RankCard>& cards);

// Publishes `mine` under its key, then reads the cards of ranks 0 .. world - 1 (its own
// included, as published) and returns them in rank order: what every rank of the job sees.
// Errors: the rendezvous's, with their code, naming the key; INTERNAL for a card that does not
// decode or is filed under another rank's key; UNAVAILABLE when `timeout` passed before every
// card was read; INVALID_ARGUMENT for a rank outside 0 .. world - 1.
Result<std::vector<RankCard>> ExchangeRankCards(const RankCard& mine, int world, uint64_t session,
                                                const RendezvousFn& rendezvous, std::chrono::milliseconds timeout);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_TRANSPORT_CHOICE_H_
