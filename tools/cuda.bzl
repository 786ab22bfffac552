"""cuda_library: .cu files compiled by the toolkit's nvcc (no CUDA rules can be fetched offline)."""

# Real code for Ampere (sm_80) and Hopper (sm_90), plus PTX so newer GPUs JIT-compile it.
_GENCODE = [
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
]

_NVCC = "/usr/local/cuda/bin/nvcc"

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    """Compiles each .cu in srcs with nvcc into an object a cc_library links.

    hdrs are visible both to nvcc and to C++ dependents; deps are cc targets (their headers are
    not seen by nvcc: keep .cu files to the toolkit's and our own hdrs).
    """
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = " ".join([
                _NVCC,
                "-c",
                "-std=c++20",
                "-O3",
                "-Xcompiler -fPIC",
                "--expt-relaxed-constexpr",
                "-I.",
                "-I$(GENDIR)",
            ] + _GENCODE + copts + ["$(location " + src + ")", "-o $@"]),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        **kwargs
    )
