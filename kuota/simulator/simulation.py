"""The simulator's public function: one replay from decoded config objects and a workloads file to the
contract's output document (``docs/simulate.md``). The report's what-if calls it in process."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kuota.simulator.config_reading import config_from_dicts
from kuota.simulator.limits import check_until
from kuota.simulator.replay import replay
from kuota.simulator.summary import output_document
from kuota.simulator.workload_reading import read_workloads


def simulate(config: Iterable[Mapping[str, Any]], workloads: Path, until: float | None = None) -> dict[str, Any]:
    """Replay ``workloads`` (JSON Lines or a trace CSV) through a fresh engine holding ``config`` (the
    ``kueue.x-k8s.io/v1beta2`` objects a CONFIG file holds, as dicts); raises
    :class:`~kuota.simulator.errors.SimulateError` naming the object or line at fault."""
    objects = config_from_dicts(config)
    return output_document(replay(objects, read_workloads(workloads, objects), check_until(until)))
