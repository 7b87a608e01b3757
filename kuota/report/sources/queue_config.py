"""The queue configuration the report needs: which namespaces feed which ClusterQueue (pure, plus a loader).

The same objects ``kuota simulate --config`` reads: from YAML (one file of several documents, or a folder of
them), or listed live from the API server and reduced to what a user writes (:func:`config_object`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kuota.report.errors import ReportInputError
from kuota.report.sources.quoting import quoted
from kuota.simulator.config_reading import read_yaml_documents
from kuota.simulator.errors import ConfigFileError

KUEUE_API = "kueue.x-k8s.io/v1beta2"
_USER_METADATA = ("name", "namespace", "labels")


def load_objects(path: Path) -> list[dict[str, Any]]:
    """Every object under ``path`` (a YAML file, or the *.yaml / *.yml files of a folder), read as ``kuota
    simulate --config`` reads it."""
    try:
        documents = read_yaml_documents(path)
    except ConfigFileError as error:
        raise ReportInputError(f"--config {error}") from error
    objects = []
    for where, document in documents:
        if not isinstance(document, dict):
            raise ReportInputError(f"--config {where}: a {type(document).__name__}, not a Kubernetes object")
        objects.append(document)
    return objects


def config_object(kind: str, api_version: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """A listed object as a config file would hold it: the server's additions (status, uid, resourceVersion,
    managedFields, ...) dropped, since simulate's reader is strict; kind and apiVersion restored, since a
    list's items of a built-in kind (Namespace) come without them."""
    metadata = item.get("metadata") or {}
    kept: dict[str, Any] = {key: item[key] for key in item if key not in {"apiVersion", "kind", "metadata", "status"}}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {key: metadata[key] for key in _USER_METADATA if metadata.get(key)},
        **kept,
    }


def namespace_queues(objects: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """namespace -> ClusterQueue, from LocalQueue objects; a namespace with two ClusterQueues is an error."""
    mapping: dict[str, str] = {}
    for obj in objects:
        if obj.get("kind") != "LocalQueue":
            continue
        metadata, spec = obj.get("metadata"), obj.get("spec")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        name, namespace = metadata.get("name"), metadata.get("namespace")
        cluster_queue = spec.get("clusterQueue") if isinstance(spec, Mapping) else None
        if not isinstance(namespace, str) or not namespace or not isinstance(cluster_queue, str) or not cluster_queue:
            raise ReportInputError(
                f"LocalQueue {quoted(namespace)}/{quoted(name)}: metadata.namespace and spec.clusterQueue must be "
                "non-empty strings"
            )
        previous = mapping.setdefault(namespace, cluster_queue)
        if previous != cluster_queue:
            raise ReportInputError(
                f"namespace {namespace} has LocalQueues for ClusterQueues {previous} and {cluster_queue}: "
                "the report attributes a namespace's GPUs to one team; keep one ClusterQueue per namespace"
            )
    return mapping
