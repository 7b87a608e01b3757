"""Generate ``api_pb2.py`` (+ ``.pyi`` for mypy) and ``api_pb2_grpc.py`` from ``api.proto`` with grpcio-tools.

``python -m kuota.exporter.podresources.generate`` rewrites them in place; ``--check`` only compares and exits 1
when the committed files are stale (the unit tests run the same comparison).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")


def generate(out_dir: Path) -> dict[str, str]:
    """Run protoc on api.proto into ``out_dir`` and return {file name: text}, imports made package-relative."""
    from grpc_tools import protoc

    include = str(Path(protoc.__file__).parent / "_proto")
    outputs = [f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}"]
    code = protoc.main(["protoc", f"-I{HERE}", f"-I{include}", *outputs, "api.proto"])
    if code != 0:
        raise RuntimeError(f"protoc failed on {HERE / 'api.proto'} with exit code {code}")
    texts = {name: (out_dir / name).read_text() for name in GENERATED}
    # protoc writes "import api_pb2", which only works with the folder on sys.path.
    texts["api_pb2_grpc.py"] = texts["api_pb2_grpc.py"].replace(
        "import api_pb2 as api__pb2", "from kuota.exporter.podresources import api_pb2 as api__pb2"
    )
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if the files are stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        texts = generate(Path(scratch))
    stale = [name for name, text in texts.items() if (HERE / name).read_text() != text] if args.check else []
    if args.check:
        for name in stale:
            print(f"{HERE / name} is stale: run python -m kuota.exporter.podresources.generate", file=sys.stderr)
        return 1 if stale else 0
    for name, text in texts.items():
        (HERE / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
