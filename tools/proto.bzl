"""C++ and Python code from .proto files with the system protoc and gRPC plugins.

Bazel 4's proto_library needs @com_google_protobuf, which cannot be fetched offline, so these
macros run protoc in a genrule. Imports between our protos are relative to the workspace root
(`import "proto/job.proto";`).
"""

def _base(src):
    return src[:-len(".proto")]

def cc_grpc_proto_library(name, srcs, deps = [], grpc = True, **kwargs):
    """A cc_library with the messages (and, if grpc, the service stubs) of srcs.

    srcs are given by name inside this package; deps are other cc_grpc_proto_library targets.
    """
    pkg = native.package_name()
    outs = []
    for src in srcs:
        outs += [_base(src) + ".pb.h", _base(src) + ".pb.cc"]
        if grpc:
            outs += [_base(src) + ".grpc.pb.h", _base(src) + ".grpc.pb.cc"]
    grpc_flags = ""
    if grpc:
        grpc_flags = "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) "
    native.genrule(
        name = name + "_protoc",
        srcs = srcs + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = "protoc -I. --cpp_out=$(GENDIR) " + grpc_flags +
              " ".join([pkg + "/" + s for s in srcs]),
    )
    native.filegroup(name = name + "_srcs", srcs = srcs + [d + "_srcs" for d in deps])
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["@system//:grpc"],
        **kwargs
    )

def py_grpc_proto_library(name, srcs, deps = [], **kwargs):
    """Python modules (<file>_pb2.py and <file>_pb2_grpc.py) for srcs, for Debian's python3."""
    pkg = native.package_name()
    outs = []
    for src in srcs:
        outs += [_base(src) + "_pb2.py", _base(src) + "_pb2_grpc.py"]
    native.genrule(
        name = name,
        srcs = srcs + deps,
        outs = outs,
        cmd = "protoc -I. --python_out=$(GENDIR) --grpc_out=$(GENDIR) " +
              "--plugin=protoc-gen-grpc=$$(command -v grpc_python_plugin) " +
              " ".join([pkg + "/" + s for s in srcs]),
        **kwargs
    )
