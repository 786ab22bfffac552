#include "kernels/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace pipecoord::kernels {

// A run of bytes inside one segment. The blocks of a segment form a list in address order; the
// first block (prev == nullptr) is never merged away, so it names the segment.
struct CachingAllocator::Block {
  enum class State { kFree, kAllocated, kAwaitingEvents };

  char* ptr = nullptr;
  size_t size = 0;       // rounded bytes
  size_t requested = 0;  // bytes asked for (Deallocate's check)
  StreamId stream = 0;   // the stream whose pool it belongs to (the whole segment's)
  bool small = false;    // from a small segment
  State state = State::kFree;
  Block* prev = nullptr;
  Block* next = nullptr;
  size_t segment_bytes = 0;          // the first block only: the segment's size
  std::set<StreamId> other_streams;  // RecordStream's, while allocated
  int pending_events = 0;            // events still to complete before reuse
  bool handed_off = false;           // held by a transport: out of owned_bytes (HandOff)
};

bool CachingAllocator::BySizeThenAddress::operator()(const Block* a, const Block* b) const {
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

namespace {

size_t RoundUp(size_t bytes, size_t multiple) { return (bytes + multiple - 1) / multiple * multiple; }

std::string Hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

// Requests above this cannot be rounded without overflow; no device has this much memory.
constexpr size_t kLargestRequest = std::numeric_limits<size_t>::max() / 4;

}  // namespace

std::vector<std::pair<std::string, int64_t>> CachingAllocatorStats::Named() const {
  return {
      {"allocated_bytes.all.current", allocated_bytes_current},
      {"allocated_bytes.all.peak", allocated_bytes_peak},
      {"reserved_bytes.all.current", reserved_bytes_current},
      {"reserved_bytes.all.peak", reserved_bytes_peak},
      {"active_bytes.all.current", active_bytes_current},
      {"active_bytes.all.peak", active_bytes_peak},
      {"owned_bytes.all.current", owned_bytes_current},
      {"owned_bytes.all.peak", owned_bytes_peak},
      {"num_alloc_retries", num_alloc_retries},
      {"num_ooms", num_ooms},
  };
}

CachingAllocator::CachingAllocator(std::unique_ptr<RawMemorySource> source,
                                   std::unique_ptr<StreamEvents> events, Options options)
    : source_(std::move(source)), events_(std::move(events)), options_(options) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  (void)WaitForAllEvents();  // nobody to report to; a block whose event failed stays out
  (void)ReleaseFreeSegments();
  for (auto& [stream, queue] : pending_) {
    for (const PendingEvent& p : queue) events_->Release(p.event);
  }
  for (Block* head : segments_) {
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

Result<void*> CachingAllocator::Allocate(size_t bytes, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return AllocateLocked(bytes, stream);
}

Result<void*> CachingAllocator::Allocate(size_t bytes) { return Allocate(bytes, options_.default_stream); }

Result<void*> CachingAllocator::AllocateLocked(size_t bytes, StreamId stream) {
  if (!deferred_error_.ok()) return deferred_error_;
  if (bytes == 0) return static_cast<void*>(nullptr);
  auto out_of_memory = [&](const std::string& why) {
    ++stats_.num_ooms;
    return ResourceExhausted("caching allocator (device " + std::to_string(options_.device) +
                             "): out of memory allocating " + std::to_string(bytes) + " bytes: " +
                             std::to_string(stats_.allocated_bytes_current) + " bytes allocated, " +
                             std::to_string(stats_.reserved_bytes_current) + " bytes reserved; " + why);
  };
  if (bytes > kLargestRequest) return out_of_memory("larger than any device");

  PIPECOORD_RETURN_IF_ERROR(ProcessCompletedEvents());
  const size_t size = RoundUp(bytes, kMinBlockSize);
  const bool small = size <= kSmallSize;
  const size_t segment_bytes = small ? kSmallSegment : RoundUp(size, kLargeRounding);

  Block* block = TakeFromPool(small ? pools_[stream].small : pools_[stream].large, size, small);
  if (block == nullptr) {
    Result<Block*> segment = NewSegment(segment_bytes, small, stream);
    if (!segment.ok() && segment.status().code() == Code::kResourceExhausted) {
      // Cached blocks of every stream may be what the source lacks: give them back, try again.
      ++stats_.num_alloc_retries;
      PIPECOORD_RETURN_IF_ERROR(WaitForAllEvents());
      PIPECOORD_RETURN_IF_ERROR(ReleaseFreeSegments());
      block = TakeFromPool(small ? pools_[stream].small : pools_[stream].large, size, small);
      if (block == nullptr) {
        segment = NewSegment(segment_bytes, small, stream);
        if (!segment.ok() && segment.status().code() == Code::kResourceExhausted) {
          return out_of_memory("the source said: " + segment.status().message());
        }
      }
    }
    if (block == nullptr) {
      if (!segment.ok()) return segment.status();
      block = *segment;
    }
  }

  block->state = Block::State::kAllocated;  // before the split, so the rest cannot merge back
  // Split off the rest when it is worth keeping; it goes back to the pool (merging with a free
  // next neighbour, if any).
  const size_t rest = block->size - size;
  if (small ? rest >= kMinBlockSize : rest > kSmallSize) {
    Block* tail = new Block;
    tail->ptr = block->ptr + size;
    tail->size = rest;
    tail->stream = block->stream;
    tail->small = block->small;
    tail->prev = block;
    tail->next = block->next;
    if (tail->next != nullptr) tail->next->prev = tail;
    block->next = tail;
    block->size = size;
    ReturnToPool(tail);
  }
  block->requested = bytes;
  block->handed_off = false;
  live_[block->ptr] = block;
  AddAllocated(static_cast<int64_t>(block->size));
  AddActive(static_cast<int64_t>(block->size));
  AddOwned(static_cast<int64_t>(block->size));
  return static_cast<void*>(block->ptr);
}

Result<CachingAllocator::Block*> CachingAllocator::NewSegment(size_t segment_bytes, bool small,
                                                               StreamId stream) {
  Result<void*> raw = source_->Allocate(segment_bytes);
  if (!raw.ok()) return raw.status();
  if (*raw == nullptr) {
    return Internal("caching allocator: the memory source returned nullptr for " + std::to_string(segment_bytes) +
                    " bytes");
  }
  Block* head = new Block;
  head->ptr = static_cast<char*>(*raw);
  head->size = segment_bytes;
  head->stream = stream;
  head->small = small;
  head->segment_bytes = segment_bytes;
  segments_.insert(head);
  AddReserved(static_cast<int64_t>(segment_bytes));
  return head;
}

CachingAllocator::Block* CachingAllocator::TakeFromPool(FreePool& pool, size_t size, bool small) {
  Block key;
  key.size = size;
  key.small = small;
  auto it = pool.lower_bound(&key);  // the smallest block that fits, lowest address first
  if (it == pool.end()) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

CachingAllocator::FreePool& CachingAllocator::PoolOf(const Block* block) {
  StreamPools& pools = pools_[block->stream];
  return block->small ? pools.small : pools.large;
}

void CachingAllocator::ReturnToPool(Block* block) {
  FreePool& pool = PoolOf(block);
  block->state = Block::State::kFree;
  block->other_streams.clear();
  if (Block* prev = block->prev; prev != nullptr && prev->state == Block::State::kFree) {
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next != nullptr && next->state == Block::State::kFree) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

Status CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    return Internal("caching allocator: free of " + Hex(ptr) + ", which is not an allocated block");
  }
  Block* block = it->second;
  live_.erase(it);
  return FreeLocked(block);
}

Status CachingAllocator::FreeLocked(Block* block) {
  AddAllocated(-static_cast<int64_t>(block->size));
  if (!block->handed_off) AddOwned(-static_cast<int64_t>(block->size));
  block->handed_off = false;
  if (block->other_streams.empty()) {
    AddActive(-static_cast<int64_t>(block->size));
    ReturnToPool(block);
    return Status::Ok();
  }
  block->state = Block::State::kAwaitingEvents;
  for (StreamId stream : block->other_streams) {
    Result<StreamEvents::Event> event = events_->Record(stream);
    if (!event.ok()) {
      // Without the event nothing tells when that stream is done with the block: it is never
      // reused (it stays active and its segment reserved).
      ++block->pending_events;
      return Status(event.status().code(), "caching allocator: free of " + Hex(block->ptr) +
                                               ": recording an event on stream " + std::to_string(stream) +
                                               ": " + event.status().message());
    }
    pending_[stream].push_back(PendingEvent{*event, block});
    ++block->pending_events;
  }
  return Status::Ok();
}

Status CachingAllocator::RecordStream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    return Internal("caching allocator: RecordStream on " + Hex(ptr) + ", which is not an allocated block");
  }
  Block* block = it->second;
  if (stream != block->stream) block->other_streams.insert(stream);
  return Status::Ok();
}

Status CachingAllocator::HandOff(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    return Internal("caching allocator: HandOff of " + Hex(ptr) + ", which is not an allocated block");
  }
  Block* block = it->second;
  if (block->handed_off) {
    return Internal("caching allocator: HandOff of " + Hex(ptr) + ", which was handed off already");
  }
  block->handed_off = true;
  AddOwned(-static_cast<int64_t>(block->size));
  return Status::Ok();
}

Status CachingAllocator::ProcessCompletedEvents() {
  for (auto& [stream, queue] : pending_) {
    while (!queue.empty()) {
      const PendingEvent& p = queue.front();
      Result<bool> done = events_->IsComplete(p.event);
      if (!done.ok()) {
        return Status(done.status().code(), "caching allocator: querying an event on stream " +
                                                std::to_string(stream) + ": " + done.status().message());
      }
      if (!*done) break;  // later events of this stream are later in its order
      events_->Release(p.event);
      Block* block = p.block;
      queue.pop_front();
      if (--block->pending_events == 0) {
        AddActive(-static_cast<int64_t>(block->size));
        ReturnToPool(block);
      }
    }
  }
  return Status::Ok();
}

Status CachingAllocator::WaitForAllEvents() {
  for (auto& [stream, queue] : pending_) {
    while (!queue.empty()) {
      const PendingEvent& p = queue.front();
      Status waited = events_->Wait(p.event);
      if (!waited.ok()) {
        return Status(waited.code(), "caching allocator: waiting for an event on stream " +
                                         std::to_string(stream) + ": " + waited.message());
      }
      events_->Release(p.event);
      Block* block = p.block;
      queue.pop_front();
      if (--block->pending_events == 0) {
        AddActive(-static_cast<int64_t>(block->size));
        ReturnToPool(block);
      }
    }
  }
  return Status::Ok();
}

Status CachingAllocator::ReleaseFreeSegments() {
  Status first_error;
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* head = *it;
    if (head->state != Block::State::kFree || head->next != nullptr) {
      ++it;
      continue;
    }
    PoolOf(head).erase(head);
    Status freed = source_->Free(head->ptr);
    if (!freed.ok() && first_error.ok()) {
      first_error = Status(freed.code(), "caching allocator: returning a segment of " +
                                             std::to_string(head->segment_bytes) + " bytes at " + Hex(head->ptr) +
                                             ": " + freed.message());
    }
    AddReserved(-static_cast<int64_t>(head->segment_bytes));  // ours no more, freed or not
    delete head;
    it = segments_.erase(it);
  }
  return first_error;
}

Status CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  Status waited = WaitForAllEvents();
  Status released = ReleaseFreeSegments();  // what is free already goes back either way
  return waited.ok() ? released : waited;
}

void CachingAllocator::Deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  Status status;
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    status = Internal("caching allocator: Deallocate of " + Hex(ptr) + ", which is not an allocated block");
  } else {
    Block* block = it->second;
    live_.erase(it);
    if (block->requested != bytes) {
      status = Internal("caching allocator: Deallocate of " + Hex(ptr) + " with " + std::to_string(bytes) +
                        " bytes; it was allocated with " + std::to_string(block->requested));
    }
    Status freed = FreeLocked(block);
    if (status.ok()) status = freed;
  }
  if (!status.ok() && deferred_error_.ok()) {
    deferred_error_ = Status(status.code(), status.message() + " (reported by a later Allocate)");
  }
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeakStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes_peak = stats_.allocated_bytes_current;
  stats_.reserved_bytes_peak = stats_.reserved_bytes_current;
  stats_.active_bytes_peak = stats_.active_bytes_current;
  stats_.owned_bytes_peak = stats_.owned_bytes_current;
}

std::vector<CachingAllocatorSegment> CachingAllocator::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CachingAllocatorSegment> out;
  for (const Block* head : segments_) {
    CachingAllocatorSegment segment;
    segment.address = reinterpret_cast<std::uintptr_t>(head->ptr);
    segment.size = head->segment_bytes;
    segment.small = head->small;
    segment.stream = head->stream;
    for (const Block* b = head; b != nullptr; b = b->next) {
      CachingAllocatorSegment::Block block;
      block.address = reinterpret_cast<std::uintptr_t>(b->ptr);
      block.size = b->size;
      block.requested = b->state == Block::State::kFree ? 0 : b->requested;
      block.state = b->state == Block::State::kFree        ? CachingAllocatorSegment::BlockState::kFree
                    : b->state == Block::State::kAllocated ? CachingAllocatorSegment::BlockState::kAllocated
                                                           : CachingAllocatorSegment::BlockState::kAwaitingEvents;
      segment.blocks.push_back(block);
    }
    out.push_back(std::move(segment));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  return out;
}

void CachingAllocator::AddAllocated(int64_t bytes) {
  stats_.allocated_bytes_current += bytes;
  stats_.allocated_bytes_peak = std::max(stats_.allocated_bytes_peak, stats_.allocated_bytes_current);
}

void CachingAllocator::AddReserved(int64_t bytes) {
  stats_.reserved_bytes_current += bytes;
  stats_.reserved_bytes_peak = std::max(stats_.reserved_bytes_peak, stats_.reserved_bytes_current);
}

void CachingAllocator::AddActive(int64_t bytes) {
  stats_.active_bytes_current += bytes;
  stats_.active_bytes_peak = std::max(stats_.active_bytes_peak, stats_.active_bytes_current);
}

void CachingAllocator::AddOwned(int64_t bytes) {
  stats_.owned_bytes_current += bytes;
  stats_.owned_bytes_peak = std::max(stats_.owned_bytes_peak, stats_.owned_bytes_current);
}

}  // namespace pipecoord::kernels
