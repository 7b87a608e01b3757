"""The one paginated list: ``limit``/``continue`` pages joined into one consistent snapshot.

A continue token that outlived etcd's compaction answers 410: the snapshot it paged through is gone and the
pages read so far cannot be joined to a newer one, so, like client-go's pager, the list is read again whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.kube.client import ApiResponse, KubeApi
from kuota.kube.errors import GoneError, MalformedResponseError

PAGE_SIZE = 500


@dataclass(frozen=True)
class Listing:
    """Every item of a list, and the resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str


async def list_all(
    api: KubeApi,
    path: str,
    *,
    page_size: int = PAGE_SIZE,
    client_timeout: float = 30.0,
    query: Sequence[tuple[str, str]] = (),
) -> Listing:
    """All items at ``path`` (a collection), page by page; raises :mod:`kuota.kube.errors`' typed errors."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        page_query = [*query, ("limit", str(page_size))] + ([("continue", token)] if token else [])
        response = await api.request("GET", path, query=page_query, client_timeout=client_timeout)
        if token and not response.ok and isinstance(response.error(), GoneError):
            response = await api.request("GET", path, query=list(query), client_timeout=client_timeout)
            items = []
        page = _page(response)
        items += [item for item in page["items"] if isinstance(item, dict)]
        metadata = page.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        token = str(metadata.get("continue") or "")
        if not token:
            return Listing(items, str(metadata.get("resourceVersion") or ""))


def _page(response: ApiResponse) -> Mapping[str, Any]:
    document = response.object()
    if not isinstance(document.get("items"), list):
        raise MalformedResponseError(
            f"{response.method} {response.path}: HTTP {response.status}: the answer is not a Kubernetes list "
            "(no items); check that the server is a Kubernetes API server",
            response.status,
            "an object without items",
        )
    return document
