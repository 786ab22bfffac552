// EtcdClient: the few calls of etcd's v3 API (gRPC, from etcd's own protos: third_party/etcd) that
// coordinators in high availability need: transactions guarded by an election key, prefix reads,
// leases, and the election service (Campaign, Leader).
//
// Endpoints: several members may be named; a call that finds its member unavailable (or past its
// deadline) is retried once on each of the others, so a cluster that lost a member goes on
// answering. Only idempotent calls are retried this way, which all of these are: a transaction
// writes fixed keys and values, a read reads.
//
// Thread safety: every method may be called from any thread at once.
#ifndef PIPECOORD_COORDINATOR_HA_ETCD_CLIENT_H_
#define PIPECOORD_COORDINATOR_HA_ETCD_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord::coordinator::ha {

struct EtcdKv {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0;
};

// One write of a transaction.
struct EtcdOp {
  enum Kind { kPut, kDeleteKey, kDeletePrefix, kDeleteRange };
  Kind kind = kPut;
  std::string key;
  std::string value;  // kPut: the value; kDeleteRange: the range's end (exclusive)
  static EtcdOp Put(std::string k, std::string v) { return {kPut, std::move(k), std::move(v)}; }
  static EtcdOp Delete(std::string k) { return {kDeleteKey, std::move(k), {}}; }
  static EtcdOp DeletePrefix(std::string k) { return {kDeletePrefix, std::move(k), {}}; }
  static EtcdOp DeleteRange(std::string from, std::string to) { return {kDeleteRange, std::move(from), std::move(to)}; }
};

// What an elected candidate holds: its key in the election and that key's create revision, which
// grows with every election held in the cluster (it is the coordinator's epoch). A guarded write
// goes through only while the key exists with that revision: once the lease holding it expires
// (the holder paused, or cut off, past its TTL), the holder's writes fail.
struct EtcdLeadership {
  std::string election, key, value;
  int64_t create_revision = 0;
  int64_t lease = 0;
};

class EtcdClient {
 public:
  // `endpoints`: "HOST:PORT[,HOST:PORT...]", each optionally prefixed with http://. INVALID_ARGUMENT
  // naming --etcd when one is malformed; nothing is contacted yet. `call_timeout` bounds each call
  // (Campaign excepted).
  static Result<std::unique_ptr<EtcdClient>> Connect(const std::string& endpoints,
                                                     std::chrono::milliseconds call_timeout);
  ~EtcdClient();

  const std::string& endpoints() const { return endpoints_; }

  // The ops in one transaction. With `guard`, only while it holds: FAILED_PRECONDITION "no longer
  // the elected coordinator" otherwise, nothing written. UNAVAILABLE naming the endpoints when no
  // member answers.
  Status Txn(const std::vector<EtcdOp>& ops, const EtcdLeadership* guard);
  // Every key under `prefix`, in key order (read in pages, so any number of keys).
  Result<std::vector<EtcdKv>> GetPrefix(const std::string& prefix);

  Result<int64_t> GrantLease(int ttl_s);
  // One keep-alive: the TTL left, in seconds (0: the lease is gone).
  Result<int64_t> KeepAlive(int64_t lease);
  Status RevokeLease(int64_t lease);

  // Blocks until the holder of `lease` leads `election` (its key's value `value`), or `stop` turns
  // true (UNAVAILABLE "campaign stopped"). Waiting candidates queue in etcd in the order they first campaigned.
  Result<EtcdLeadership> Campaign(const std::string& election, int64_t lease, const std::string& value,
                                  const std::atomic<bool>& stop);
  // The current leader's value; NOT_FOUND when nobody leads.
  Result<std::string> Leader(const std::string& election);

 private:
  struct Impl;
  explicit EtcdClient(std::unique_ptr<Impl> impl, std::string endpoints);
  std::unique_ptr<Impl> impl_;
  std::string endpoints_;
};

}  // namespace pipecoord::coordinator::ha

#endif  // PIPECOORD_COORDINATOR_HA_ETCD_CLIENT_H_
