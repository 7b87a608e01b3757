"""Writing generated history as OpenMetrics text for ``promtool tsdb create-blocks-from openmetrics``.

promtool wants each metric family's samples together and each series' samples in time order, so series are
collected per family and written family by family.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

Labels = Mapping[str, str]


class OpenMetricsHistory:
    def __init__(self) -> None:
        self._families: dict[str, tuple[str, list[tuple[str, Labels, list[tuple[int, float]]]]]] = {}

    def add(
        self, family: str, kind: str, sample_name: str, labels: Labels, points: Iterable[tuple[int, float]]
    ) -> None:
        """One series: ``points`` are (Unix seconds, value) in increasing time."""
        declared, series = self._families.setdefault(family, (kind, []))
        if declared != kind:
            raise ValueError(f"family {family} declared {declared}, not {kind}")
        series.append((sample_name, dict(labels), list(points)))

    def gauge(self, name: str, labels: Labels, points: Iterable[tuple[int, float]]) -> None:
        self.add(name, "gauge", name, labels, points)

    def counter(self, name: str, labels: Labels, points: Iterable[tuple[int, float]]) -> None:
        """``name`` ends in _total, as OpenMetrics counters do."""
        self.add(name.removesuffix("_total"), "counter", name, labels, points)

    def write(self, out: TextIO) -> None:
        for family, (kind, series) in self._families.items():
            out.write(f"# TYPE {family} {kind}\n")
            for sample_name, labels, points in series:
                text = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
                prefix = f"{sample_name}{{{text}}}" if text else sample_name
                out.writelines(f"{prefix} {value:g} {t}\n" for t, value in points)
        out.write("# EOF\n")

    def write_file(self, path: Path) -> Path:
        with path.open("w", encoding="utf-8") as out:
            self.write(out)
        return path


def gpu_labels(node: str, gpu: int) -> dict[str, str]:
    """The labels kuota's exporter gives one GPU (its ``kuota_gpu_up``)."""
    return {"Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}"}


def pod_gpu_labels(node: str, gpu: int, namespace: str, pod: str) -> dict[str, str]:
    """The labels of a pod's series on one GPU (``kuota_gpu_allocated`` and the pod's use of it)."""
    return {**gpu_labels(node, gpu), "namespace": namespace, "pod": pod, "container": "main"}


def gpus_up(om: OpenMetricsHistory, nodes: Iterable[str], gpus_per_node: int, times: Iterable[int]) -> None:
    """``kuota_gpu_up`` 1 for every GPU of every node at each of ``times``."""
    at = list(times)
    for node in nodes:
        for gpu in range(gpus_per_node):
            om.gauge("kuota_gpu_up", gpu_labels(node, gpu), ((t, 1) for t in at))
