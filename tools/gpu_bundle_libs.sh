# shellcheck shell=bash
# Which shared libraries the GPU bundle leaves to the machine it runs on (sourced by
# tools/gpu_bundle_assemble.sh and tools/gpu_bundle_test.sh, so both apply one rule).
#
# Left out:
# - glibc itself (libc, libm, ld-linux, ...): it must match the machine's kernel interface and
#   the machine's is newer than Debian 12's 2.36 (binaries built here ran there, components.md).
# - the CUDA driver (libcuda, libnvidia-*): it belongs to the installed kernel module.
# - cuBLAS and NCCL: the GPU machines have them (toolkit or nvidia-* wheels) and they are too big
#   to carry (NCCL alone is 208 MiB, cuBLAS 52 MiB; the device tool carries 64 MiB).
# Carried: everything else, libstdc++ and libgcc_s included, and cudart (0.7 MiB, listed as
# redistributable in the CUDA EULA's Attachment A): the kernels then run on the runtime nvcc built
# them against, whatever runtime the machine has.

# machine_provided_lib SONAME: true if the bundle does not carry SONAME.
machine_provided_lib() {
  case "$1" in
    linux-vdso.so.* | ld-linux-x86-64.so.* | /lib64/ld-linux-x86-64.so.*) return 0 ;;
    libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | libresolv.so.2) return 0 ;;
    libutil.so.1 | libanl.so.1 | libmvec.so.1 | libnsl.so.1) return 0 ;;
    libcuda.so* | libnvidia-*) return 0 ;;
    libcublas.so.* | libcublasLt.so.* | libnccl.so.*) return 0 ;;
  esac
  return 1
}
