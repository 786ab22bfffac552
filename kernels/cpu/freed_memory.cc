#include "kernels/cpu/freed_memory.h"

#include <malloc.h>

namespace pipecoord::kernels::cpu {

bool KeepFreedHostMemory() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2); setting
  // it also stops glibc from moving it (and the trim threshold) on its own.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace pipecoord::kernels::cpu
