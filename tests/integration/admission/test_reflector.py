"""The list+watch cache against the real API server: paginated first list, watch, server timeouts, 410 Gone."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from kuota.kube.client import KubeApi
from kuota.kube.errors import GoneError
from kuota.kube.reflector import Event, EventType, Reflector, ResourceType
from tests.waiting import async_wait_until

pytestmark = pytest.mark.integration


def _data(obj: Mapping[str, Any]) -> str:
    return str((obj.get("data") or {}).get("v", ""))


async def _send(api: KubeApi, method: str, path: str, body: Any = None, content_type: str = "application/json") -> None:
    (await api.request(method, path, body=body, content_type=content_type, client_timeout=10)).raise_for_status()


async def _config_map(api: KubeApi, namespace: str, name: str, value: str) -> None:
    body = {"metadata": {"name": name, "namespace": namespace}, "data": {"v": value}}
    await _send(api, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body)


def _config_maps(api: KubeApi, namespace: str, **options: Any) -> Reflector[str]:
    resource = ResourceType("", "v1", "configmaps", namespaced=True, namespace=namespace)
    return Reflector(api, resource, _data, **options)


async def test_first_list_is_paginated_then_watch_delivers_every_change(api_client: KubeApi, namespace: str) -> None:
    for index in range(5):
        await _config_map(api_client, namespace, f"before-{index}", str(index))
    reflector = _config_maps(api_client, namespace, page_size=2)
    events: list[Event[str]] = []
    reflector.subscribe(events.append)
    async with asyncio.TaskGroup() as group:
        task = group.create_task(reflector.run())
        await asyncio.wait_for(reflector.synced.wait(), timeout=20)
        assert {f"{namespace}/before-{index}" for index in range(5)} <= {event.key for event in events}
        await _config_map(api_client, namespace, "after", "a")
        configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
        patch = {"data": {"v": "changed"}}
        await _send(api_client, "PATCH", f"{configmaps}/before-0", patch, "application/merge-patch+json")
        await _send(api_client, "DELETE", f"{configmaps}/before-1")
        await async_wait_until(
            lambda: (
                reflector.get(f"{namespace}/after") == "a"
                and reflector.get(f"{namespace}/before-0") == "changed"
                and reflector.get(f"{namespace}/before-1") is None
            ),
            "the watch to deliver create, update and delete",
        )
        task.cancel()
    kinds = [(event.type, event.key.split("/")[1]) for event in events[-3:]]
    assert kinds == [(EventType.ADDED, "after"), (EventType.MODIFIED, "before-0"), (EventType.DELETED, "before-1")]


async def test_the_watch_survives_server_side_timeouts(api_client: KubeApi, namespace: str) -> None:
    reflector = _config_maps(api_client, namespace, watch_timeout_seconds=1)
    async with asyncio.TaskGroup() as group:
        task = group.create_task(reflector.run())
        await asyncio.wait_for(reflector.synced.wait(), timeout=20)
        # Longer than two server-side watch timeouts: the reflector must have re-watched to see this.
        await asyncio.sleep(2.5)
        await _config_map(api_client, namespace, "late", "x")
        await async_wait_until(lambda: reflector.get(f"{namespace}/late") == "x", "a change after the watch timed out")
        task.cancel()
    assert reflector.relists == 0


def _local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def _cluster_queue_of(obj: Mapping[str, Any]) -> str:
    return str(obj["spec"]["clusterQueue"])


# The watch cache of a CRD starts when the CRD is installed, so resourceVersion 1 is older than anything it
# can replay: the API server answers with a 410 Expired ERROR event, as it does after etcd compaction.
TOO_OLD = "1"


async def test_a_too_old_resource_version_is_answered_410_and_the_reflector_relists(
    api_client: KubeApi, namespace: str, kuota_crds: object
) -> None:
    del kuota_crds
    group, version, plural = "kueue.x-k8s.io", "v1beta2", "localqueues"
    queues = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"
    await _send(api_client, "POST", queues, _local_queue(namespace, "a", "x"))
    resource = ResourceType(group, version, plural, namespaced=True, namespace=namespace)
    reflector = Reflector(api_client, resource, _cluster_queue_of)
    await reflector.list_once()
    assert reflector.get(f"{namespace}/a") == "x"
    events: list[Event[str]] = []
    reflector.subscribe(events.append)
    # Changes the reflector does not see, then a watch from a version the server no longer has.
    await _send(api_client, "DELETE", f"{queues}/a")
    await _send(api_client, "POST", queues, _local_queue(namespace, "b", "y"))
    reflector.resource_version = TOO_OLD
    async with asyncio.TaskGroup() as task_group:
        task = task_group.create_task(reflector.run())
        await async_wait_until(lambda: reflector.relists == 1, "a relist after 410 Gone")
        await async_wait_until(lambda: reflector.get(f"{namespace}/b") == "y", "the relist to see the new object")
        task.cancel()
    assert reflector.get(f"{namespace}/a") is None
    assert (EventType.DELETED, f"{namespace}/a") in [(event.type, event.key) for event in events]


async def test_watching_from_a_too_old_version_raises_resource_expired(
    api_client: KubeApi, namespace: str, kuota_crds: object
) -> None:
    del kuota_crds
    resource = ResourceType("kueue.x-k8s.io", "v1beta2", "localqueues", namespaced=True, namespace=namespace)
    reflector = Reflector(api_client, resource, _cluster_queue_of)
    reflector.resource_version = TOO_OLD
    with pytest.raises(GoneError, match="too old resource version"):
        await reflector._watch()
