// CachingAllocator: a pool of device memory that keeps freed blocks for reuse, after PyTorch's
// CUDA caching allocator (smaller). cudaMalloc and cudaFree synchronise the device and cost
// milliseconds; a training step allocates and frees thousands of activations, so the pool asks
// its source for big segments once and carves requests out of them.
//
// The pool logic is independent of CUDA: segments come from a RawMemorySource and stream-order
// questions go to StreamEvents, so the whole policy runs (and is tested) on the CPU.
// kernels/cuda/cuda_allocator.h gives the CUDA source and events.
//
// Policy:
// - A request is rounded up to a multiple of 512 bytes. Requests of at most 1 MiB (after
//   rounding) are "small" and come from 2 MiB segments shared by many small blocks; larger ones
//   come from their own segment rounded up to 2 MiB. Small and large segments never mix.
// - A free block is found best-fit (smallest that fits, then lowest address) in the pool of the
//   request's stream and split when the rest is worth keeping (small: >= 512 bytes; large:
//   > 1 MiB). A freed block merges with free neighbours of its segment.
// - A block belongs to the stream it was allocated on. Freed, it is reusable by that stream at
//   once: the stream runs the next user's work after the previous user's. When it was also used
//   on other streams (RecordStream), an event is recorded on each of those at Free, and the block
//   returns to the pool only once all of them completed.
// - When the source has no memory, every cached segment nobody uses is returned (EmptyCache) and
//   the request tried once more (num_alloc_retries); a second failure is RESOURCE_EXHAUSTED
//   naming the size asked, the bytes allocated and reserved (num_ooms).
//
// Thread-safe (one mutex; the source and events are called under it).
#ifndef PIPECOORD_KERNELS_CACHING_ALLOCATOR_H_
#define PIPECOORD_KERNELS_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"

namespace pipecoord::kernels {

// A stream's identity, opaque to the pool (a cudaStream_t's bits on the GPU; 0 is CUDA's legacy
// default stream, a valid identity).
using StreamId = std::uintptr_t;

// Where the pool's segments come from (cudaMalloc / cudaFree on one device).
class RawMemorySource {
 public:
  virtual ~RawMemorySource() = default;
  // RESOURCE_EXHAUSTED when the memory is not there (the pool then empties its cache and retries
  // once); any other error is passed to the caller as is.
  virtual Result<void*> Allocate(size_t bytes) = 0;
  virtual Status Free(void* ptr) = 0;
};

// Events on streams: how the pool learns that work queued on another stream has finished.
class StreamEvents {
 public:
  using Event = std::uintptr_t;
  virtual ~StreamEvents() = default;
  // Marks the point after the work queued so far on `stream`.
  virtual Result<Event> Record(StreamId stream) = 0;
  // Whether all the work before `event` has finished. Events recorded on one stream complete in
  // the order they were recorded (stream order).
  virtual Result<bool> IsComplete(Event event) = 0;
  // Blocks the calling thread until `event` completed (EmptyCache, before returning memory).
  virtual Status Wait(Event event) = 0;
  // The pool is done with `event` (it may be reused for a later Record).
  virtual void Release(Event event) = 0;
};

// Counters, named as torch.cuda.memory_stats() names them. Bytes are of rounded blocks.
struct CachingAllocatorStats {
  int64_t allocated_bytes_current = 0;  // blocks handed out and not freed
  int64_t allocated_bytes_peak = 0;
  int64_t reserved_bytes_current = 0;  // segments held from the source
  int64_t reserved_bytes_peak = 0;
  int64_t active_bytes_current = 0;  // allocated + freed blocks still awaiting other streams
  int64_t active_bytes_peak = 0;
  // Not PyTorch's: allocated minus the blocks handed off to a transport (HandOff). What the
  // step's memory check compares with the plan's budget: a transport that keeps a sent tensor
  // until its copy or its peer is done holds bytes the plan gives back at Send.
  int64_t owned_bytes_current = 0;
  int64_t owned_bytes_peak = 0;
  int64_t num_alloc_retries = 0;  // source failures followed by EmptyCache and a retry
  int64_t num_ooms = 0;           // requests answered RESOURCE_EXHAUSTED

  // ("allocated_bytes.all.current", value), ... in the order of the fields above.
  std::vector<std::pair<std::string, int64_t>> Named() const;
};

// One segment as Snapshot shows it (torch.cuda.memory_snapshot's shape, smaller).
struct CachingAllocatorSegment {
  enum class BlockState { kFree, kAllocated, kAwaitingEvents };
  struct Block {
    std::uintptr_t address = 0;
    size_t size = 0;       // rounded; a block may be larger than asked when the rest was small
    size_t requested = 0;  // bytes asked for (allocated blocks)
    BlockState state = BlockState::kFree;
  };
  std::uintptr_t address = 0;
  size_t size = 0;
  bool small = false;  // serves requests of at most kSmallSize
  StreamId stream = 0;
  std::vector<Block> blocks;  // in address order, tiling the segment
};

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kMinBlockSize = 512;       // every size is a multiple of this
  static constexpr size_t kSmallSize = 1 << 20;      // largest request served by small segments
  static constexpr size_t kSmallSegment = 2 << 20;   // size of a small segment
  static constexpr size_t kLargeRounding = 2 << 20;  // large segments are multiples of this

  struct Options {
    MemoryKind kind = MemoryKind::kCuda;  // what Allocator::kind() answers
    int device = -1;                      // what Allocator::device() answers
    StreamId default_stream = 0;          // the stream of Allocator::Allocate's blocks
  };

  CachingAllocator(std::unique_ptr<RawMemorySource> source, std::unique_ptr<StreamEvents> events,
                   Options options);
  // Returns every segment whose blocks are all free (waiting for pending events first).
  // Segments with live blocks are left alone: a tensor outliving its allocator is a bug.
  ~CachingAllocator() override;

  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // At least `bytes` bytes (aligned like the source's segments, 512-byte granular) usable by
  // work on `stream`. 0 bytes gives nullptr (as PyTorch). RESOURCE_EXHAUSTED after the retry;
  // other errors (a failed event query, the source's non-OOM errors) are passed on.
  Result<void*> Allocate(size_t bytes, StreamId stream);
  // Gives back a block from Allocate. Reusable at once by its own stream, or after the events
  // of RecordStream's streams completed. nullptr is a no-op; an unknown pointer is INTERNAL.
  Status Free(void* ptr);
  // The block at `ptr` (as Allocate returned it) is used by work on `stream` too: Free will not
  // let it be reused before that work finished. Its own stream is ignored.
  Status RecordStream(void* ptr, StreamId stream);
  // The live block at `ptr` is held by a transport that is sending it: its bytes leave
  // owned_bytes_current now (and are not subtracted again when it is freed); allocated, reserved
  // and active are unchanged. An unknown pointer, or one handed off already, is INTERNAL.
  Status HandOff(void* ptr) override;
  // Returns to the source every segment with no live block (waiting for pending events first).
  // Reports the first error of the source or the events; continues past it.
  Status EmptyCache();

  CachingAllocatorStats stats() const;
  // Peaks restart from the current values.
  void ResetPeakStats();
  // Every segment held, in address order: for tests and for printing what fills the memory.
  std::vector<CachingAllocatorSegment> Snapshot() const;

  // kernels::Allocator: blocks on the default stream. Deallocate cannot report an error; the
  // first one (an unknown pointer, a size other than the one allocated, a failed event record)
  // is kept and returned by every later Allocate, so a broken pool is never used silently.
  MemoryKind kind() const override { return options_.kind; }
  int device() const override { return options_.device; }
  Result<void*> Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;

 private:
  struct Block;
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreePool = std::set<Block*, BySizeThenAddress>;
  struct StreamPools {
    FreePool small;
    FreePool large;
  };
  struct PendingEvent {
    StreamEvents::Event event;
    Block* block;
  };

  Result<void*> AllocateLocked(size_t bytes, StreamId stream);
  Result<Block*> NewSegment(size_t segment_bytes, bool small, StreamId stream);
  Block* TakeFromPool(FreePool& pool, size_t size, bool small);
  void ReturnToPool(Block* block);
  Status FreeLocked(Block* block);
  Status ProcessCompletedEvents();
  Status WaitForAllEvents();
  Status ReleaseFreeSegments();
  FreePool& PoolOf(const Block* block);
  void AddAllocated(int64_t bytes);
  void AddReserved(int64_t bytes);
  void AddActive(int64_t bytes);
  void AddOwned(int64_t bytes);

  std::unique_ptr<RawMemorySource> source_;
  std::unique_ptr<StreamEvents> events_;
  const Options options_;

  mutable std::mutex mu_;
  std::map<StreamId, StreamPools> pools_;
  std::unordered_map<void*, Block*> live_;  // allocated blocks by address
  std::map<StreamId, std::deque<PendingEvent>> pending_;  // by the stream the event is on
  std::set<Block*> segments_;  // the first block of every segment held
  CachingAllocatorStats stats_;
  Status deferred_error_;  // Deallocate's first failure
};

}  // namespace pipecoord::kernels

#endif  // PIPECOORD_KERNELS_CACHING_ALLOCATOR_H_
