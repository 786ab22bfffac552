"""Builds the package with the stubs generated from ../proto (pyproject.toml says what it holds).

The stubs are the top-level package `proto` (`from proto import worker_pb2`, as Bazel's
//proto:api_py lays them out), generated into the build by grpcio-tools' protoc with the
repository root as the include path, so their imports (`from proto import job_pb2`) resolve inside
the installed package. Builds from a checkout only: the .proto files live beside python/.
"""
import os
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent.parent


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        from grpc_tools import protoc  # a build requirement (pyproject.toml)
        protos = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "proto").glob("*.proto"))
        if not protos:
            raise SystemExit(f"no .proto files in {ROOT / 'proto'}: build from a pipecoord checkout")
        out = pathlib.Path(self.build_lib).resolve()  # protoc runs from the repository root
        (out / "proto").mkdir(parents=True, exist_ok=True)
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            rc = protoc.main(["protoc", "-I.", f"--python_out={out}", f"--grpc_python_out={out}", *protos])
        finally:
            os.chdir(cwd)
        if rc != 0:
            raise SystemExit(f"protoc failed ({rc}) on {' '.join(protos)}")
        (out / "proto" / "__init__.py").write_text('"""Stubs generated from pipecoord\'s proto/ at build time."""\n')


setup(cmdclass={"build_py": BuildWithStubs})
