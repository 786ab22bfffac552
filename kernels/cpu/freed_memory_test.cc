// KeepFreedHostMemory's promise, read from glibc's own accounting (mallinfo2): blocks below 32 MiB
// come from the heap; larger ones, when the heap has no room for them, are mapped on their own; a
// freed block stays in the heap, so allocating it again does not grow the heap. The setting is
// process-wide and cannot be undone, so the first test, which starts from glibc's default, must
// run first (gtest's declaration order; not shuffled).
#include "kernels/cpu/freed_memory.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace pipecoord::kernels::cpu {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Where a block's pointer goes, so the compiler cannot drop a malloc/free pair.
void* volatile sink = nullptr;

struct Heap {
  size_t bytes = 0;          // mallinfo2's arena: the heap's size, obtained by sbrk
  size_t mapped_blocks = 0;  // mallinfo2's hblks: blocks mapped on their own (mmap)
};

Heap Now() {
  const struct mallinfo2 m = mallinfo2();
  return {m.arena, m.hblks};
}

// Allocates `bytes` (touched, like activations), reports the heap while it is held, frees it.
Heap WhileHolding(size_t bytes) {
  sink = std::malloc(bytes);
  EXPECT_NE(sink, nullptr);
  std::memset(sink, 1, bytes);
  const Heap held = Now();
  std::free(sink);
  sink = nullptr;
  return held;
}

TEST(FreedMemoryTest, BlocksBelow32MiBComeFromTheHeapAndStayThereOnceFreed) {
  // glibc's default (nothing set yet in this process): a 1 MiB block is mapped on its own. Freeing
  // it moves glibc's own thresholds to about 1 MiB (mmap) and 2 MiB (trim), far below what the
  // checks after the setting need, so they see the setting and not glibc's adjustment.
  const Heap start = Now();
  EXPECT_EQ(WhileHolding(1 * kMiB).mapped_blocks, start.mapped_blocks + 1);

  ASSERT_TRUE(KeepFreedHostMemory());

  // The threshold, while the heap has no room for either block (glibc maps a block only when the
  // heap would have to grow for it): 32 MiB is mapped on its own and unmapped when freed...
  const Heap before = Now();
  ASSERT_LT(before.bytes, 16 * kMiB);
  EXPECT_EQ(WhileHolding(32 * kMiB).mapped_blocks, before.mapped_blocks + 1);
  EXPECT_EQ(Now().mapped_blocks, before.mapped_blocks);
  // ...and just below it comes from the heap, which grows for it.
  const size_t below = 32 * kMiB - 64 * 1024;
  const Heap held = WhileHolding(below);
  EXPECT_EQ(held.mapped_blocks, before.mapped_blocks);
  EXPECT_GE(held.bytes, below);
  // Freed, the block stays in the heap (the trim threshold is 1 GiB)...
  const Heap freed = Now();
  EXPECT_EQ(freed.bytes, held.bytes);
  // ...and is used again: the same block once more does not grow the heap.
  EXPECT_EQ(WhileHolding(below).bytes, freed.bytes);
  EXPECT_EQ(Now().bytes, freed.bytes);
}

// Set again (the worker and a benchmark may both call it): accepted, and the heap keeps what it
// holds; the threshold still maps a block the heap has no room for.
TEST(FreedMemoryTest, SettingItAgainKeepsTheSameBehaviour) {
  ASSERT_TRUE(KeepFreedHostMemory());
  const Heap before = Now();
  ASSERT_TRUE(KeepFreedHostMemory());
  EXPECT_EQ(Now().bytes, before.bytes);
  const Heap held = WhileHolding(16 * kMiB);
  EXPECT_EQ(held.mapped_blocks, before.mapped_blocks);
  EXPECT_EQ(Now().bytes, held.bytes);
  EXPECT_EQ(WhileHolding(held.bytes + 32 * kMiB).mapped_blocks, before.mapped_blocks + 1);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
