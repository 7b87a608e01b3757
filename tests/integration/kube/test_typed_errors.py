"""The client's typed errors, against a real API server's real answers: the Status reasons and codes the
certificate store, the reflector, the report and the controller's writes act on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kuota.kube.client import KubeApi
from kuota.kube.errors import AlreadyExistsError, BadRequestError, ConflictError, NotFoundError
from kuota.kube.listing import list_all

pytestmark = pytest.mark.integration


def _secret(namespace: str, resource_version: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "typed", "namespace": namespace}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": {}}


async def test_a_real_api_server_answers_are_typed_by_cause(
    api_client: KubeApi, make_namespace: Callable[[], str]
) -> None:
    namespace = make_namespace()
    secrets = f"/api/v1/namespaces/{namespace}/secrets"

    missing = await api_client.request("GET", f"{secrets}/typed")
    assert type(missing.error()) is NotFoundError

    created = (await api_client.request("POST", secrets, body=_secret(namespace))).object()
    taken = await api_client.request("POST", secrets, body=_secret(namespace))
    assert type(taken.error()) is AlreadyExistsError

    current = created["metadata"]["resourceVersion"]
    changed = {**_secret(namespace, current), "data": {"key": "dmFsdWU="}}
    (await api_client.request("PUT", f"{secrets}/typed", body=changed)).raise_for_status()
    stale = await api_client.request("PUT", f"{secrets}/typed", body=_secret(namespace, current))
    stale_error = stale.error()
    assert type(stale_error) is ConflictError
    assert "the object has been modified" in stale_error.detail


async def test_a_paginated_list_joins_every_page_and_a_bad_token_is_a_bad_request(
    api_client: KubeApi, make_namespace: Callable[[], str]
) -> None:
    namespace = make_namespace()
    secrets = f"/api/v1/namespaces/{namespace}/secrets"
    for index in range(3):
        await api_client.request("POST", secrets, body={**_secret(namespace), "metadata": {"name": f"s{index}"}})
    malformed = await api_client.request("GET", secrets, query=[("limit", "1"), ("continue", "not-a-token")])
    assert type(malformed.error()) is BadRequestError
    listing = await list_all(api_client, secrets, page_size=1)
    assert sorted(item["metadata"]["name"] for item in listing.items) == ["s0", "s1", "s2"]
    assert listing.resource_version
