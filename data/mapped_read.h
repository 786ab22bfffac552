// ReadMapped: reading the bytes of a memory-mapped file that someone may truncate or replace
// while it is mapped (a dataset rewritten under a running job). Such a read faults (SIGBUS),
// which would end the process; inside ReadMapped it ends only the read, which reports it. No file
// is opened here: the readers of mapped bytes (data/token_stream.h) call it.
#ifndef PIPECOORD_DATA_MAPPED_READ_H_
#define PIPECOORD_DATA_MAPPED_READ_H_

#include <cstddef>

namespace pipecoord::data {

// Runs `read()`, which reads mapped bytes in [lo, lo + size); false when a read there faulted
// (SIGBUS: the file was truncated or replaced under its mapping), `read` then left where it was.
// The fault leaves `read`'s frames by longjmp: only trivially destructible state may live in them.
// Thread-safe. Installs, once, a process-wide SIGBUS handler that hands any other fault back to
// the handler before it (by default the process ends, as without it).
bool ReadMappedImpl(const void* lo, size_t size, void (*read)(void*), void* arg);
template <typename F>
bool ReadMapped(const void* lo, size_t size, F& read) {
  return ReadMappedImpl(lo, size, [](void* f) { (*static_cast<F*>(f))(); }, &read);
}

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_MAPPED_READ_H_
