"""Reading simulate's CONFIG: a YAML file or a folder of them (``kuota simulate --config``), or already-decoded
objects (the report's what-if, generated configs), as the engine's objects, each defined once, their Cohorts a
tree; and what the workloads are read against (priority classes, LocalQueues). Read once per run: not compiled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from kuota.engine import (
    AdmissionCheck,
    ApiObject,
    ClusterQueue,
    Cohort,
    Configuration,
    InvalidObjectError,
    LocalQueue,
    WorkloadPriorityClass,
    parse_object,
)
from kuota.simulator.errors import ConfigFileError
from kuota.simulator.limits import MAX_CONFIG_BYTES
from kuota.simulator.quoting import listed, one_line, quoted
from kuota.simulator.yaml_reading import ExpansionBudget, load_documents


def seed_directory() -> Path:
    """The embedded copy of ``examples/seed`` that ``kuota simulate`` runs without arguments."""
    return Path(str(resources.files("kuota.simulator") / "seed"))


def read_yaml_documents(path: Path) -> list[tuple[str, Any]]:
    """Every YAML document of a file, or of the ``*.yaml``/``*.yml`` files of a folder (in name order), each
    with where it came from (``FILE (document N)``); empty documents are skipped. The one reader of queue
    config files: ``kuota simulate --config`` and ``kuota report --config`` both read through it. The files
    together may hold ``MAX_CONFIG_BYTES``, and ``MAX_YAML_NODES`` with their aliases expanded
    (:mod:`kuota.simulator.yaml_reading`)."""
    if path.is_dir():
        try:
            files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        except OSError as error:
            raise ConfigFileError(f"{path}: the folder cannot be read: {error.strerror or error}") from error
        if not files:
            raise ConfigFileError(f"{path}: the folder has no .yaml files; give a CONFIG file or folder of them")
    elif path.exists():
        files = [path]
    else:
        raise ConfigFileError(f"{path}: no such file or folder; give the CONFIG YAML or a folder of them")
    budget = ExpansionBudget()
    left = MAX_CONFIG_BYTES
    documents: list[tuple[str, Any]] = []
    for file in files:
        data = _config_bytes(file, left)
        left -= len(data)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            raise ConfigFileError(
                f"{file}: not UTF-8 text (byte 0x{data[error.start]:02x} on line {line}); save it as UTF-8"
            ) from error
        loaded = load_documents(text, str(file), budget)
        documents += [(f"{file} (document {i + 1})", doc) for i, doc in enumerate(loaded) if doc is not None]
    return documents


def _config_bytes(file: Path, limit: int) -> bytes:
    """The file's bytes, read a block at a time so that no more than ``limit`` is ever held (``read(limit)``
    would allocate all of it up front)."""
    blocks: list[bytes] = []
    size = 0
    try:
        with file.open("rb") as stream:
            while size <= limit:
                block = stream.read(1 << 16)
                if not block:
                    return b"".join(blocks)
                blocks.append(block)
                size += len(block)
    except OSError as error:
        raise ConfigFileError(f"{file}: cannot be read: {error.strerror or error}") from error
    raise ConfigFileError(
        f"{file}: the CONFIG is larger than {MAX_CONFIG_BYTES} bytes (all its files together); "
        "a queue config is a few kilobytes"
    )


def load_config(path: Path) -> list[ApiObject]:
    """Every object of a YAML file, or of the ``*.yaml``/``*.yml`` files of a folder (in name order)."""
    return _parse_objects(read_yaml_documents(path))


def config_from_dicts(documents: Iterable[Mapping[str, Any]]) -> list[ApiObject]:
    """Parse already-decoded objects (generated configs); errors name the object's position."""
    return _parse_objects((f"object {index + 1}", document) for index, document in enumerate(documents))


def _parse_objects(documents: Iterable[tuple[str, object]]) -> list[ApiObject]:
    """The objects, each defined once, their Cohorts a tree: a second definition would silently replace the
    first in the engine, and a parentName cycle silently stops every ClusterQueue under it."""
    objects: list[ApiObject] = []
    places: dict[str, str] = {}
    for where, document in documents:
        _check_header(where, document)
        try:
            obj = parse_object(document)
        except InvalidObjectError as error:
            raise ConfigFileError(f"{where}: {one_line(str(error))}") from error
        if isinstance(obj, AdmissionCheck) and not _says_inactive(document):
            obj = replace(obj, active=True)
        identity = _identity(obj)
        if identity is not None:
            first = places.get(identity)
            if first is not None:
                raise ConfigFileError(f"{where}: {identity} is defined twice, here and in {first}; keep one of them")
            places[identity] = where
        objects.append(obj)
    _check_cohort_tree(objects, places)
    return objects


def _says_inactive(document: object) -> bool:
    """Whether an AdmissionCheck's ``status`` has an ``Active`` condition that is not True. A CONFIG stands for
    a cluster whose check controllers run, so a check without that condition counts as Active."""
    status = document.get("status") if isinstance(document, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Active" and c.get("status") != "True" for c in conditions
    )


def _check_header(where: str, document: object) -> None:
    """The fields an object is named by are text: anything else would be quoted whole in the message."""
    if not isinstance(document, Mapping):
        return
    for key in ("apiVersion", "kind"):
        value = document.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigFileError(f"{where}: {key} must be a string, got {quoted(value)}")
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if name is not None and not isinstance(name, str):
        raise ConfigFileError(f"{where}: metadata.name must be a string, got {quoted(name)}")


def _identity(obj: ApiObject) -> str | None:
    """How the engine keys ``obj`` (None for the Configuration, of which the last one read is used)."""
    if isinstance(obj, Configuration):
        return None
    # Every other kind is keyed by its name; a LocalQueue, the one namespaced kind, by namespace and name.
    return f"{type(obj).__name__} {f'{obj.namespace}/{obj.name}' if isinstance(obj, LocalQueue) else obj.name}"


def _check_cohort_tree(objects: Sequence[ApiObject], places: Mapping[str, str]) -> None:
    parents = {obj.name: obj.parent for obj in objects if isinstance(obj, Cohort) and obj.parent is not None}
    settled: set[str] = set()
    for start in parents:
        path: list[str] = []
        on_path: set[str] = set()
        name: str | None = start
        while name is not None and name not in settled:
            if name in on_path:
                raise ConfigFileError(_cycle_message(path[path.index(name) :], objects, parents, places))
            path.append(name)
            on_path.add(name)
            name = parents.get(name)
        settled.update(path)


def _cycle_message(
    cycle: list[str], objects: Sequence[ApiObject], parents: Mapping[str, str], places: Mapping[str, str]
) -> str:
    members = set(cycle)
    stopped = []
    for obj in objects:
        if isinstance(obj, ClusterQueue) and obj.cohort is not None:
            cohort: str | None = obj.cohort
            for _ in range(len(parents) + 1):
                if cohort is None or cohort in members:
                    break
                cohort = parents.get(cohort)
            if cohort is not None and cohort in members:
                stopped.append(obj.name)
    chain = listed([*cycle, cycle[0]], 8, " -> ")
    where = "; ".join(f"{name} in {places[f'Cohort {name}']}" for name in cycle[:4])
    more = f"; and {len(cycle) - 4} more" if len(cycle) > 4 else ""
    under = f"; ClusterQueue(s) {listed(stopped, 6, ', ')} under it would admit nothing" if stopped else ""
    return (
        f"Cohorts {chain} form a parentName cycle ({where}{more}){under}: "
        "a Cohort cannot be its own ancestor; remove one of these parentNames"
    )


def priority_values(objects: Iterable[ApiObject]) -> dict[str, int]:
    return {obj.name: obj.value for obj in objects if isinstance(obj, WorkloadPriorityClass)}


def local_queues(objects: Iterable[ApiObject]) -> list[tuple[str, str]]:
    return sorted((obj.namespace, obj.name) for obj in objects if isinstance(obj, LocalQueue))
