#include "coordinator/ha/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <thread>

#include "etcd/etcdserver/api/v3election/v3electionpb/v3election.grpc.pb.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace pipecoord::coordinator::ha {

namespace {

// The end of the range holding every key that starts with `prefix` (etcd's "prefix + 1").
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    const unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last < 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

bool Retryable(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

struct EtcdClient::Impl {
  struct Member {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<v3electionpb::Election::Stub> election;
  };
  std::vector<Member> members;
  std::atomic<size_t> current{0};
  std::chrono::milliseconds timeout{0};

  // Runs `call(member, ctx)` on the current member, then on each other one while the answer is
  // UNAVAILABLE or DEADLINE_EXCEEDED; the next calls start at the member that answered.
  template <class F>
  grpc::Status Call(F&& call) {
    grpc::Status st;
    const size_t first = current.load();
    for (size_t i = 0; i < members.size(); ++i) {
      const size_t m = (first + i) % members.size();
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + timeout);
      st = call(members[m], ctx);
      if (!Retryable(st)) {
        current.store(m);
        return st;
      }
    }
    current.store((first + 1) % members.size());
    return st;
  }

  Status Error(const char* what, const grpc::Status& st) const {
    std::string names;
    for (const Member& m : members) names += (names.empty() ? "" : ",") + m.address;
    const std::string msg = std::string("etcd ") + names + ": " + what + ": " + st.error_message();
    if (Retryable(st)) return Unavailable(msg);
    if (st.error_code() == grpc::StatusCode::NOT_FOUND) return NotFound(msg);  // e.g. an expired lease
    return Unavailable(msg);
  }
};

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl, std::string endpoints)
    : impl_(std::move(impl)), endpoints_(std::move(endpoints)) {}
EtcdClient::~EtcdClient() = default;

Result<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const std::string& endpoints,
                                                        std::chrono::milliseconds call_timeout) {
  auto impl = std::make_unique<Impl>();
  impl->timeout = call_timeout;
  size_t start = 0;
  while (start <= endpoints.size()) {
    size_t comma = endpoints.find(',', start);
    if (comma == std::string::npos) comma = endpoints.size();
    std::string ep = endpoints.substr(start, comma - start);
    start = comma + 1;
    if (ep.rfind("http://", 0) == 0) ep = ep.substr(7);
    if (ep.rfind("https://", 0) == 0) {
      return InvalidArgument("--etcd: \"" + ep + "\": TLS to etcd is not supported; use http:// endpoints");
    }
    const size_t colon = ep.rfind(':');
    if (ep.empty() || colon == std::string::npos || colon == 0 || colon + 1 == ep.size() ||
        ep.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return InvalidArgument("--etcd: must be HOST:PORT[,HOST:PORT...] (etcd's client URLs), got \"" + endpoints + "\"");
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);  // a page of job rows with their plans
    // A member that went away is tried again soon, not after gRPC's default backoff of up to 2 min.
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    Impl::Member m;
    m.address = ep;
    m.channel = grpc::CreateCustomChannel(ep, grpc::InsecureChannelCredentials(), args);
    m.kv = etcdserverpb::KV::NewStub(m.channel);
    m.lease = etcdserverpb::Lease::NewStub(m.channel);
    m.election = v3electionpb::Election::NewStub(m.channel);
    impl->members.push_back(std::move(m));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(impl), endpoints));
}

Status EtcdClient::Txn(const std::vector<EtcdOp>& ops, const EtcdLeadership* guard) {
  etcdserverpb::TxnRequest req;
  if (guard != nullptr) {
    etcdserverpb::Compare* c = req.add_compare();
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_target(etcdserverpb::Compare::CREATE);
    c->set_key(guard->key);
    c->set_create_revision(guard->create_revision);
  }
  for (const EtcdOp& op : ops) {
    etcdserverpb::RequestOp* r = req.add_success();
    switch (op.kind) {
      case EtcdOp::kPut:
        r->mutable_request_put()->set_key(op.key);
        r->mutable_request_put()->set_value(op.value);
        break;
      case EtcdOp::kDeleteKey:
        r->mutable_request_delete_range()->set_key(op.key);
        break;
      case EtcdOp::kDeletePrefix:
        r->mutable_request_delete_range()->set_key(op.key);
        r->mutable_request_delete_range()->set_range_end(PrefixEnd(op.key));
        break;
      case EtcdOp::kDeleteRange:
        r->mutable_request_delete_range()->set_key(op.key);
        r->mutable_request_delete_range()->set_range_end(op.value);
        break;
    }
  }
  etcdserverpb::TxnResponse resp;
  grpc::Status st = impl_->Call([&](Impl::Member& m, grpc::ClientContext& ctx) { return m.kv->Txn(&ctx, req, &resp); });
  if (!st.ok()) return impl_->Error("write", st);
  if (!resp.succeeded()) {
    return FailedPrecondition("etcd " + endpoints_ + ": no longer the elected coordinator (election key " +
                              guard->key + " at revision " + std::to_string(guard->create_revision) +
                              " is gone): nothing written");
  }
  return Status::Ok();
}

Result<std::vector<EtcdKv>> EtcdClient::GetPrefix(const std::string& prefix) {
  std::vector<EtcdKv> out;
  const std::string end = PrefixEnd(prefix);
  std::string from = prefix;
  int64_t revision = 0;  // every page from the first page's snapshot
  for (;;) {
    etcdserverpb::RangeRequest req;
    req.set_key(from);
    req.set_range_end(end);
    req.set_limit(1000);
    req.set_revision(revision);
    etcdserverpb::RangeResponse resp;
    grpc::Status st =
        impl_->Call([&](Impl::Member& m, grpc::ClientContext& ctx) { return m.kv->Range(&ctx, req, &resp); });
    if (!st.ok()) return impl_->Error("read", st);
    if (revision == 0) revision = resp.header().revision();
    for (const mvccpb::KeyValue& kv : resp.kvs()) {
      out.push_back({kv.key(), kv.value(), kv.create_revision(), kv.mod_revision()});
    }
    if (!resp.more() || resp.kvs().empty()) return out;
    from = resp.kvs(resp.kvs_size() - 1).key() + std::string(1, '\0');
  }
}

Result<int64_t> EtcdClient::GrantLease(int ttl_s) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  etcdserverpb::LeaseGrantResponse resp;
  grpc::Status st =
      impl_->Call([&](Impl::Member& m, grpc::ClientContext& ctx) { return m.lease->LeaseGrant(&ctx, req, &resp); });
  if (!st.ok()) return impl_->Error("lease grant", st);
  if (!resp.error().empty()) return Unavailable("etcd " + endpoints_ + ": lease grant: " + resp.error());
  return resp.id();
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  etcdserverpb::LeaseKeepAliveResponse resp;
  grpc::Status st = impl_->Call([&](Impl::Member& m, grpc::ClientContext& ctx) {
    auto stream = m.lease->LeaseKeepAlive(&ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (!stream->Write(req) || !stream->Read(&resp)) {
      stream->WritesDone();
      grpc::Status f = stream->Finish();
      return f.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream closed") : f;
    }
    stream->WritesDone();
    return stream->Finish();
  });
  if (!st.ok()) return impl_->Error("lease keep-alive", st);
  return resp.ttl();
}

Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  grpc::Status st =
      impl_->Call([&](Impl::Member& m, grpc::ClientContext& ctx) { return m.lease->LeaseRevoke(&ctx, req, &resp); });
  return st.ok() ? Status::Ok() : impl_->Error("lease revoke", st);
}

Result<EtcdLeadership> EtcdClient::Campaign(const std::string& election, int64_t lease, const std::string& value,
                                            const std::atomic<bool>& stop) {
  v3electionpb::CampaignRequest req;
  req.set_name(election);
  req.set_lease(lease);
  req.set_value(value);
  while (!stop.load()) {
    // One long call per member at a time; a watcher cancels it when `stop` turns. (etcd resigns a
    // cancelled campaign's key; campaigning again with the same lease queues it anew.)
    const size_t m = impl_->current.load() % impl_->members.size();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    std::atomic<bool> done{false};
    std::thread watcher([&] {
      while (!done.load() && !stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!done.load()) ctx.TryCancel();
    });
    v3electionpb::CampaignResponse resp;
    grpc::Status st = impl_->members[m].election->Campaign(&ctx, req, &resp);
    done.store(true);
    watcher.join();
    if (st.ok()) {
      EtcdLeadership out;
      out.election = election;
      out.key = resp.leader().key();
      out.create_revision = resp.leader().rev();
      out.lease = resp.leader().lease();
      out.value = value;
      return out;
    }
    if (stop.load()) break;
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) continue;  // still queued: ask again
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      impl_->current.store((m + 1) % impl_->members.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    return impl_->Error("campaign", st);  // e.g. the lease expired: the caller grants a new one
  }
  return Unavailable("etcd " + endpoints_ + ": campaign stopped");
}

Result<std::string> EtcdClient::Leader(const std::string& election) {
  v3electionpb::LeaderRequest req;
  req.set_name(election);
  v3electionpb::LeaderResponse resp;
  grpc::Status st =
      impl_->Call([&](Impl::Member& m, grpc::ClientContext& ctx) { return m.election->Leader(&ctx, req, &resp); });
  if (st.error_code() == grpc::StatusCode::NOT_FOUND ||
      (!st.ok() && st.error_message().find("no leader") != std::string::npos)) {
    return NotFound("etcd " + endpoints_ + ": no coordinator leads " + election);
  }
  if (!st.ok()) return impl_->Error("leader", st);
  return resp.kv().value();
}

}  // namespace pipecoord::coordinator::ha
