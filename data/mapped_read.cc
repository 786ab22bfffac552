#include "data/mapped_read.h"

#include <setjmp.h>
#include <signal.h>

#include <cstdint>
#include <mutex>

namespace pipecoord::data {
namespace {

struct GuardFrame {
  sigjmp_buf env;
  const uint8_t* lo;
  const uint8_t* hi;
};
// The innermost ReadMapped of this thread. initial-exec: read from a signal handler, it must not
// allocate.
__attribute__((tls_model("initial-exec"))) thread_local GuardFrame* t_frame = nullptr;
struct sigaction g_previous;
std::once_flag g_installed;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  GuardFrame* f = t_frame;
  const auto* at = static_cast<const uint8_t*>(info->si_addr);
  if (f != nullptr && at >= f->lo && at < f->hi) siglongjmp(f->env, 1);
  // Not a guarded read: what would have happened without this handler.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
  } else {
    ::signal(SIGBUS, SIG_DFL);  // returning re-runs the access, which faults into the default: the end
  }
}

}  // namespace

bool ReadMappedImpl(const void* lo, size_t size, void (*read)(void*), void* arg) {
  std::call_once(g_installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
  GuardFrame frame;
  frame.lo = static_cast<const uint8_t*>(lo);
  frame.hi = frame.lo + size;
  GuardFrame* const outer = t_frame;
  if (sigsetjmp(frame.env, 1) != 0) {
    t_frame = outer;
    return false;
  }
  t_frame = &frame;
  read(arg);
  t_frame = outer;
  return true;
}

}  // namespace pipecoord::data
