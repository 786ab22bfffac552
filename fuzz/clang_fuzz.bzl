"""libFuzzer binaries built with clang while the rest of the build uses the default gcc toolchain.

libFuzzer needs clang's coverage instrumentation in the code under test, not only in the target,
so clang_fuzz_binary compiles its srcs and, through an aspect that walks `deps`, the sources of
every cc_library below them with clang++ -fsanitize=fuzzer-no-link,address,undefined. One action
per source file: Bazel caches the objects and shares them between the fuzz binaries. System
libraries (@system) contribute their linkopts and stay uninstrumented.
"""

_COPTS = [
    "-std=c++20",
    "-O1",
    "-gline-tables-only",  # symbolized stacks at a fraction of -g's size
    "-fno-omit-frame-pointer",
    "-fsanitize=fuzzer-no-link,address,undefined",
    "-fno-sanitize-recover=all",  # undefined behaviour is a crash, so the fuzzer keeps the input
]

_LINKOPTS = ["-fsanitize=fuzzer,address,undefined"]

FuzzObjects = provider(fields = {
    "objects": "depset of instrumented object files",
    "linkopts": "depset of the libraries' link flags",
})

def _compile(ctx, src, cc, extra_inputs, extra_flags):
    obj = ctx.actions.declare_file("_fuzz_objs/%s/%s.o" % (ctx.label.name, src.short_path))
    args = ctx.actions.args()
    args.add_all(_COPTS + extra_flags)
    args.add_all(cc.quote_includes, before_each = "-iquote")
    args.add_all(cc.includes, before_each = "-I")
    args.add_all(cc.system_includes, before_each = "-isystem")
    args.add_all(cc.defines, format_each = "-D%s")
    args.add_all(["-c", src.path, "-o", obj.path])
    ctx.actions.run_shell(
        command = 'exec clang++-14 "$@"',
        arguments = [args],
        inputs = depset([src] + extra_inputs, transitive = [cc.headers]),
        outputs = [obj],
        mnemonic = "FuzzCompile",
        progress_message = "clang++-14 (fuzz) %s" % src.short_path,
        use_default_shell_env = True,  # clang++-14 (tools/setup.sh) from PATH, as genrules find protoc
    )
    return obj

def _sources(files):
    return [f for f in files if f.extension in ("cc", "cpp", "c")]

def _fuzz_objects_aspect_impl(target, ctx):
    deps = getattr(ctx.rule.attr, "deps", [])
    objects = []
    if ctx.rule.kind == "cc_library" and CcInfo in target:
        srcs = getattr(ctx.rule.files, "srcs", [])
        private_hdrs = [f for f in srcs if f.extension in ("h", "hpp", "inc")]
        cc = target[CcInfo].compilation_context
        objects = [_compile(ctx, s, cc, private_hdrs, ["-w"]) for s in _sources(srcs)]
    return [FuzzObjects(
        objects = depset(objects, transitive = [d[FuzzObjects].objects for d in deps if FuzzObjects in d]),
        linkopts = depset(
            getattr(ctx.rule.attr, "linkopts", []),
            transitive = [d[FuzzObjects].linkopts for d in deps if FuzzObjects in d],
        ),
    )]

fuzz_objects_aspect = aspect(
    implementation = _fuzz_objects_aspect_impl,
    attr_aspects = ["deps"],
)

def _clang_fuzz_binary_impl(ctx):
    cc = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps]).compilation_context
    hdrs = [f for f in ctx.files.srcs if f.extension == "h"]
    own = [_compile(ctx, s, cc, hdrs, ["-Wall", "-Wextra", "-Werror"]) for s in _sources(ctx.files.srcs)]
    objects = depset(own, transitive = [d[FuzzObjects].objects for d in ctx.attr.deps])
    linkopts = depset(transitive = [d[FuzzObjects].linkopts for d in ctx.attr.deps]).to_list()
    out = ctx.actions.declare_file(ctx.label.name)
    args = ctx.actions.args()
    args.add_all(_LINKOPTS)
    args.add_all(objects)
    args.add_all(["-o", out.path])
    args.add_all(linkopts)
    ctx.actions.run_shell(
        command = 'exec clang++-14 "$@"',
        arguments = [args],
        inputs = objects,
        outputs = [out],
        mnemonic = "FuzzLink",
        progress_message = "clang++-14 (fuzz) linking %s" % out.short_path,
        use_default_shell_env = True,
    )
    return [DefaultInfo(files = depset([out]), executable = out)]

clang_fuzz_binary = rule(
    implementation = _clang_fuzz_binary_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cc", ".h"]),
        "deps": attr.label_list(providers = [CcInfo], aspects = [fuzz_objects_aspect]),
    },
    executable = True,
    doc = "A libFuzzer binary: srcs define LLVMFuzzerTestOneInput; deps are cc_library targets.",
)
