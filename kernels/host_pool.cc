#include "kernels/host_pool.h"

#include <string>

namespace pipecoord::kernels {
namespace {

// Each block starts 64 bytes before the address handed out (which keeps the 64-byte alignment):
// who counted it, how many bytes, and whether a transport holds it now.
struct BlockHeader {
  CountingHostAllocator* pool;
  size_t bytes;
  std::atomic<bool> handed_off;
};
constexpr size_t kHeader = 64;
static_assert(sizeof(BlockHeader) <= kHeader);

BlockHeader* HeaderOf(const void* ptr) {
  return reinterpret_cast<BlockHeader*>(static_cast<char*>(const_cast<void*>(ptr)) - kHeader);
}

thread_local CountingHostAllocator* current_pool = nullptr;

void RaisePeak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

bool CountingHostAllocator::Count(size_t bytes) {
  const auto n = static_cast<int64_t>(bytes);
  const int64_t now = allocated_.fetch_add(n) + n;
  const int64_t limit = limit_.load();
  if (limit > 0 && now > limit) {
    allocated_.fetch_sub(n);
    return false;
  }
  RaisePeak(allocated_peak_, now);
  RaisePeak(owned_peak_, owned_.fetch_add(n) + n);
  allocations_.fetch_add(1);
  return true;
}

void CountingHostAllocator::Uncount(size_t bytes, bool handed_off) {
  const auto n = static_cast<int64_t>(bytes);
  allocated_.fetch_sub(n);
  if (!handed_off) owned_.fetch_sub(n);
}

void CountingHostAllocator::ResetPeaks() {
  allocated_peak_.store(allocated_.load());
  owned_peak_.store(owned_.load());
}

Result<void*> CountingHostAllocator::Allocate(size_t bytes) {
  void* p = AllocateHostBlock(this, bytes);
  if (p == nullptr) {
    return Status(Code::kResourceExhausted,
                  "host memory: cannot allocate " + std::to_string(bytes) + " bytes (" +
                      std::to_string(allocated_bytes()) + " allocated" +
                      (limit_.load() > 0 ? ", limit " + std::to_string(limit_.load()) : std::string()) + ")");
  }
  return p;
}

void CountingHostAllocator::Deallocate(void* ptr, size_t) { FreeHostBlock(ptr); }

Status CountingHostAllocator::HandOff(void* ptr) {
  if (ptr == nullptr || HostBlockPool(ptr) != this) {
    return InvalidArgument("host block hand-off: the block was not counted by this allocator");
  }
  BlockHeader* h = HeaderOf(ptr);
  if (!h->handed_off.exchange(true)) owned_.fetch_sub(static_cast<int64_t>(h->bytes));
  return Status::Ok();
}

CountingHostAllocator* CurrentHostPool() { return current_pool; }

ScopedHostPool::ScopedHostPool(CountingHostAllocator* pool) : previous_(current_pool) { current_pool = pool; }
ScopedHostPool::~ScopedHostPool() { current_pool = previous_; }

void* AllocateHostBlock(CountingHostAllocator* pool, size_t bytes) {
  if (pool != nullptr && !pool->Count(bytes)) return nullptr;
  void* raw = ::operator new(kHeader + bytes, std::align_val_t{64}, std::nothrow);
  if (raw == nullptr) {
    if (pool != nullptr) pool->Uncount(bytes, false);
    return nullptr;
  }
  auto* h = static_cast<BlockHeader*>(raw);
  h->pool = pool;
  h->bytes = bytes;
  new (&h->handed_off) std::atomic<bool>(false);
  return static_cast<char*>(raw) + kHeader;
}

void FreeHostBlock(void* ptr) {
  if (ptr == nullptr) return;
  BlockHeader* h = HeaderOf(ptr);
  if (h->pool != nullptr) h->pool->Uncount(h->bytes, h->handed_off.load());
  ::operator delete(static_cast<void*>(h), std::align_val_t{64});
}

CountingHostAllocator* HostBlockPool(const void* ptr) { return ptr == nullptr ? nullptr : HeaderOf(ptr)->pool; }

}  // namespace pipecoord::kernels
