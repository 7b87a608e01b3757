"""The reflector over KubeApi against a stand-in API server: pages, watch events, bookmarks, 410 and reconnects.

The real API server runs the same contract in tests/integration/admission/test_reflector.py; here each step is
scripted, so the failure paths (a 410 mid-watch, a connection cut) are exercised exactly.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kuota.kube.client import KubeApi
from kuota.kube.credentials import ApiServerAccess
from kuota.kube.reflector import Backoff, Event, EventType, Reflector, ResourceType
from tests.waiting import async_wait_until

CONFIG_MAPS = ResourceType("", "v1", "configmaps", namespaced=True, namespace="a")


def _config_map(name: str, value: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "a", "resourceVersion": version}, "data": {"v": value}}


def _value(obj: Mapping[str, Any]) -> str:
    return str(obj["data"]["v"])


class ApiServer:
    """Lists ``objects`` in pages; each watch request takes the next scripted list of events (then ends)."""

    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = []
        self.list_version = "10"
        self.watches: list[list[dict[str, Any] | None]] = []  # None: cut the connection there
        self.queries: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.queries.append(dict(request.query))
        if request.query.get("watch") != "true":
            start = int(request.query.get("continue") or 0)
            end = start + int(request.query["limit"])
            token = str(end) if end < len(self.objects) else ""
            metadata = {"resourceVersion": self.list_version, "continue": token}
            return web.json_response({"metadata": metadata, "items": self.objects[start:end]})
        events = self.watches.pop(0) if self.watches else []
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for event in events:
            if event is None:
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(json.dumps(event).encode() + b"\n")
        if not self.watches:
            await asyncio.Event().wait()  # the last scripted watch stays open until the test ends
        await response.write_eof()
        return response


@pytest.fixture
async def served() -> AsyncIterator[tuple[ApiServer, KubeApi]]:
    fake = ApiServer()
    app = web.Application()
    app.router.add_get(CONFIG_MAPS.path, fake.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    async with KubeApi(ApiServerAccess(str(server.make_url("")).rstrip("/"), ssl.create_default_context())) as api:
        yield fake, api
    await server.close()


async def test_a_paged_consistent_list_then_watch_events_and_bookmarks_keep_the_store(
    served: tuple[ApiServer, KubeApi],
) -> None:
    fake, api = served
    fake.objects = [_config_map(f"m{index}", str(index), "5") for index in range(5)]
    fake.watches = [
        [
            {"type": "MODIFIED", "object": _config_map("m0", "changed", "11")},
            {"type": "DELETED", "object": _config_map("m1", "1", "12")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}},
        ]
    ]
    reflector = Reflector(api, CONFIG_MAPS, _value, page_size=2)
    events: list[Event[str]] = []
    reflector.subscribe(events.append)
    async with asyncio.TaskGroup() as group:
        task = group.create_task(reflector.run())
        await async_wait_until(lambda: reflector.resource_version == "20", "the bookmark's resourceVersion")
        task.cancel()
    lists = [query for query in fake.queries if "watch" not in query]
    assert lists == [{"limit": "2"}, {"limit": "2", "continue": "2"}, {"limit": "2", "continue": "4"}]
    watch = next(query for query in fake.queries if "watch" in query)
    assert (watch["resourceVersion"], watch["allowWatchBookmarks"]) == ("10", "true")
    assert {key: reflector.get(key) for key in ("a/m0", "a/m1", "a/m4")} == {
        "a/m0": "changed",
        "a/m1": None,
        "a/m4": "4",
    }
    assert [(event.type, event.key) for event in events[-2:]] == [
        (EventType.MODIFIED, "a/m0"),
        (EventType.DELETED, "a/m1"),
    ]


async def test_a_410_error_event_relists_and_reports_what_was_missed(served: tuple[ApiServer, KubeApi]) -> None:
    fake, api = served
    fake.objects = [_config_map("old", "x", "5")]
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    fake.watches = [[gone], []]
    reflector = Reflector(api, CONFIG_MAPS, _value)
    await reflector.list_once()
    events: list[Event[str]] = []
    reflector.subscribe(events.append)
    fake.objects = [_config_map("new", "y", "30")]
    fake.list_version = "30"
    async with asyncio.TaskGroup() as group:
        task = group.create_task(reflector.run())
        await async_wait_until(lambda: reflector.relists == 1 and reflector.get("a/new") == "y", "a relist after 410")
        task.cancel()
    assert reflector.get("a/old") is None
    assert [(event.type, event.key) for event in events] == [(EventType.DELETED, "a/old"), (EventType.ADDED, "a/new")]


async def test_a_cut_connection_reconnects_from_the_last_resource_version_without_relisting(
    served: tuple[ApiServer, KubeApi],
) -> None:
    fake, api = served
    fake.watches = [[{"type": "ADDED", "object": _config_map("m", "1", "15")}, None], []]
    reflector = Reflector(api, CONFIG_MAPS, _value, backoff=Backoff(initial=0.01, maximum=0.05))
    async with asyncio.TaskGroup() as group:
        task = group.create_task(reflector.run())
        await async_wait_until(lambda: len([q for q in fake.queries if "watch" in q]) == 2, "a second watch")
        task.cancel()
    watches = [query["resourceVersion"] for query in fake.queries if "watch" in query]
    assert watches == ["10", "15"]
    assert reflector.relists == 0
    assert reflector.get("a/m") == "1"
