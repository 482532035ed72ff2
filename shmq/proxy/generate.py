"""Regenerate the Python modules of RocketMQ 5's protos (``python -m shmq.proxy.generate``).

The protos keep RocketMQ's file names (``apache/rocketmq/v2/*.proto`` under ``protos/``), so
the descriptors register under the names every RocketMQ 5 client registers; the generated
modules live in ``shmq.proxy.v2``, so the one import protoc writes between them
(``from apache.rocketmq.v2 import definition_pb2``) is rewritten to that package. Needs
``grpcio-tools`` (a development tool, not a dependency); the output is committed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

PROTO_ROOT = os.path.join(os.path.dirname(__file__), "protos")
PROTO_DIR = "apache/rocketmq/v2"
PROTOS = ("definition.proto", "service.proto")
OUT_DIR = os.path.join(os.path.dirname(__file__), "v2")
PACKAGE = "shmq.proxy.v2"
# what protoc writes for service.proto's and the stub's imports, and what they become
_IMPORT = "from apache.rocketmq.v2 import "
# protoc's style is not the project's: lint and format leave the generated modules alone
_HEADER = "# ruff: noqa\n# fmt: off\n"
# the modules kept: definition.proto has no service, so its *_pb2_grpc.py would be empty
OUTPUTS = ("definition_pb2.py", "service_pb2.py", "service_pb2_grpc.py")


def generate() -> list[str]:
    """Run protoc on ``PROTOS`` and write ``OUTPUTS`` into ``OUT_DIR``; returns their paths."""
    from grpc_tools import protoc  # a development tool: imported only here

    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")  # google/protobuf/*
    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={tmp}",
                f"--grpc_python_out={tmp}"]  # fmt: skip
        code = protoc.main(args + [f"{PROTO_DIR}/{name}" for name in PROTOS])
        if code != 0:
            raise SystemExit(f"protoc failed with exit code {code}")
        written = []
        for name in OUTPUTS:
            with open(os.path.join(tmp, PROTO_DIR, name), encoding="utf-8") as f:
                text = _HEADER + f.read().replace(_IMPORT, f"from {PACKAGE} import ")
            path = os.path.join(OUT_DIR, name)
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
            shutil.move(path + ".tmp", path)
            written.append(path)
    return written


def main() -> None:
    for path in generate():
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
