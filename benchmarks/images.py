"""The images `make images` built: each one's size in podman's store and as the OCI archive a user pushes, and
how long `kuota version` takes to start in it (container creation, the interpreter, the compiled engine's import),
the median of five runs, beside the base image's own `python3 -c pass`.

Run after `make ci-images` (or `make images`): ``.venv/bin/python benchmarks/images.py``. Prints one line an image.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.pod_container import REPO, podman

RUNS = 5


def started_seconds(image: str, *command: str) -> float:
    """The median wall time of ``podman run --rm image command`` as the chart runs it (non-root, read-only)."""
    times = []
    for _ in range(RUNS):
        began = time.perf_counter()
        podman("run", "--rm", "--read-only", "--cap-drop=all", "--user", "65532:65532", image, *command)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="localhost/kuota/python-base:bookworm", help="the base image, to compare")
    base = parser.parse_args().base
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    print(f"{'image':<38} {'store MB':>9} {'archive MB':>11} {'start s':>8}")
    if podman("image", "exists", base, check=False).returncode == 0:
        size = int(podman("image", "inspect", "--format", "{{.Size}}", base).stdout)
        start = started_seconds(base, "python3", "-c", "pass")
        print(f"{base:<38} {size / 1e6:>9.0f} {'':>11} {start:>8.2f}")
    for component in ("manager", "exporter"):
        image = f"kuota/{component}:{version}"
        size = int(podman("image", "inspect", "--format", "{{.Size}}", image).stdout)
        archive = REPO / "build" / "images" / f"{component}-{version}.tar"
        archive_mb = f"{archive.stat().st_size / 1e6:.0f}" if archive.exists() else "-"
        start = started_seconds(image, "version")
        print(f"{image:<38} {size / 1e6:>9.0f} {archive_mb:>11} {start:>8.2f}")


if __name__ == "__main__":
    main()
