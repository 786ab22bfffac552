// FUZZ_CHECK: an invariant of a fuzz target. A broken one aborts, which libFuzzer reports as a
// crash and keeps the input; the replay test fails the same way.
#ifndef PIPECOORD_FUZZ_FUZZ_CHECK_H_
#define PIPECOORD_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

#endif  // PIPECOORD_FUZZ_FUZZ_CHECK_H_
