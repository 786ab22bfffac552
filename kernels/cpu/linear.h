// Linear layer without bias, Y = X W^T, split the way zero-bubble pipelines need it:
// forward (F), input gradient (B) and weight gradient (W) are separate functions.
//
// Layouts (row-major): X [n, in], W [out, in] (PyTorch's nn.Linear layout), Y [n, out].
// T = float runs OpenBLAS's sgemm (fp32 sums in the library's blocked order) on GemmThreads()
// threads; the result is a pure function of the inputs, the shape and that thread count (OpenBLAS
// splits rows and columns among threads, never a sum), so reruns and resumed runs are bit-exact.
// T = double (finite-difference tests) runs the reference loops of linear_reference.h, whose
// sums run in double. PIPECOORD_CPU_GEMM=reference in the environment sends T = float to those
// loops too (what the GEMMs were before; for before/after measurements). Callers own every buffer;
// no buffer may alias another.
#ifndef PIPECOORD_KERNELS_CPU_LINEAR_H_
#define PIPECOORD_KERNELS_CPU_LINEAR_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

struct LinearDims {
  int64_t n = 0;    // rows (tokens)
  int64_t in = 0;   // input features
  int64_t out = 0;  // output features
};

// F: y = x w^T. Overwrites y [n, out].
template <typename T>
void LinearForward(const T* x, const T* w, T* y, const LinearDims& d);

// B: dx = dy w, or dx += dy w when accumulate. dy [n, out], dx [n, in]. Needs no activations.
template <typename T>
void LinearBackwardInput(const T* dy, const T* w, T* dx, const LinearDims& d, bool accumulate);

// W: dw += dy^T x. dw [out, in]: accumulates, so micro-batches add up. Needs no weights.
template <typename T>
void LinearBackwardWeight(const T* dy, const T* x, T* dw, const LinearDims& d);

// Fault injection (the `corrupt` fault, worker/daemon/fault_injection.h): while on, every fp32
// LinearForward on the calling thread flips one mantissa bit (bit 20: a 1/8 relative change) of
// its output's middle element: a unit whose GEMM corrupts its output, for training and the
// numerical probe alike. Thread-local (a rank runs its kernels on its own thread); off by default.
void SetGemmCorruption(bool on);
bool GemmCorruption();
// The `flip` fault: only the next fp32 LinearForward on this thread flips that bit of its output's
// last element (a transient).
void CorruptNextGemm();
// Where the faults above, if on, corrupt a GEMM output of n elements now: the element whose bit
// 20 (a float's; a bf16 output's bit 4, the same 1/8 relative change) flips, or -1; a pending
// `flip` is used up. The CPU LinearForward asks it, and so does the CUDA GemmContext for its F and
// W outputs (kernels/cuda/gemm.h): one fault switch for every backend's GEMM unit.
int64_t TakeGemmFault(int64_t n);

// Threads each fp32 GEMM uses: 1 unless the environment's PIPECOORD_CPU_THREADS says otherwise
// (read once, at the first GEMM) or SetGemmThreads changed it. One worker rank per core is the
// usual layout, so one thread is the default. Process-wide.
int GemmThreads();
void SetGemmThreads(int threads);

// The kernel set OpenBLAS runs in this process ("SkylakeX", "Haswell", "Zen", ...). A process
// linking these GEMMs never runs OpenBLAS's generic "Prescott" fallback on a CPU with AVX2 + FMA
// or AVX-512 unless OPENBLAS_CORETYPE says so: linear.cc runs it again, before main, with the
// kernels the CPU supports (0.3.21 falls back on CPUs newer than itself).
const char* BlasCoreName();

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_LINEAR_H_
