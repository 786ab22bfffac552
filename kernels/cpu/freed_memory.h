// Keeps freed host memory in the process for reuse. A CPU stage allocates each micro-batch's saved
// activations in F and frees them after W (worker/model/transformer_block.h); glibc's malloc by
// default gives large freed blocks back to the kernel (blocks above its mmap threshold, and the
// heap's top above M_TRIM_THRESHOLD), so every micro-batch page-faults and zeroes the same memory
// anew: about a fifth of a block's F+B+W at b 2, s 128, h 256 (bench/cpu_block_bench, measured
// with and without). With this, blocks up to 32 MiB come from the heap and the heap keeps up to
// 1 GiB of freed memory: the process's resident memory stays at its peak instead of falling
// between micro-batches. Process-wide; the worker calls it at start, the benchmarks too.
#ifndef PIPECOORD_KERNELS_CPU_FREED_MEMORY_H_
#define PIPECOORD_KERNELS_CPU_FREED_MEMORY_H_

namespace pipecoord::kernels::cpu {

// Returns false where the C library refused a setting (then nothing is promised).
bool KeepFreedHostMemory();

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_FREED_MEMORY_H_
