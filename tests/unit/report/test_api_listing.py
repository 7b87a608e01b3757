"""Listing Workloads and queue objects from an API server: pages, expired tokens, and clear failures.

The server here is a small aiohttp app speaking the list protocol (``limit``/``continue``, Status bodies);
the real API server is exercised in tests/integration/report/test_report_from_the_api_server.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from kuota.cli import main
from kuota.engine.decoding import parse_object
from kuota.kube.credentials import ApiServerAccess
from kuota.report.errors import KubernetesRequestError, KubernetesUnreachableError, ReportInputError
from kuota.report.sources.api_listing import ApiSource, api_source, read_cluster
from kuota.report.sources.queue_config import namespace_queues

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ServerFactory = Callable[[dict[str, Handler]], Awaitable[TestServer]]


def _workload(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": f"w-{index}", "namespace": "ml", "creationTimestamp": "2026-10-01T00:00:00Z"},
        "spec": {"queueName": "q"},
    }


def _status(code: int, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    return web.json_response(body, status=code)


async def _empty_list(request: web.Request) -> web.StreamResponse:
    del request
    return web.json_response({"kind": "List", "metadata": {}, "items": []})


@pytest.fixture
async def api_server() -> AsyncIterator[ServerFactory]:
    """Start an app whose routes map API paths to handlers; every path not given lists nothing."""
    started: list[TestServer] = []

    async def start(routes: dict[str, Handler]) -> TestServer:
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        for plural in (
            "workloads",
            "resourceflavors",
            "clusterqueues",
            "localqueues",
            "cohorts",
            "workloadpriorityclasses",
        ):
            if f"{KUEUE}/{plural}" not in routes:
                app.router.add_get(f"{KUEUE}/{plural}", _empty_list)
        if "/api/v1/namespaces" not in routes:
            app.router.add_get("/api/v1/namespaces", _empty_list)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.close()


def _source(server: TestServer | str) -> ApiSource:
    url = server if isinstance(server, str) else str(server.make_url("")).rstrip("/")
    access = ApiServerAccess(url, ssl.create_default_context(), {"Authorization": "Bearer report-token"})
    return ApiSource(access, "--kubeconfig test.kubeconfig")


async def test_a_list_follows_continue_tokens_until_the_last_page(api_server: ServerFactory) -> None:
    stored = [_workload(i) for i in range(5)]
    seen: list[dict[str, str]] = []

    async def workloads(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer report-token"
        seen.append(dict(request.query))
        start = int(request.query.get("continue") or 0)
        end = start + int(request.query["limit"])
        token = str(end) if end < len(stored) else ""
        return web.json_response({"metadata": {"continue": token}, "items": stored[start:end]})

    server = await api_server({f"{KUEUE}/workloads": workloads})
    listed = await read_cluster(_source(server), with_queues=False, page_size=2)
    assert [w.name for w in listed.workloads.workloads] == [w["metadata"]["name"] for w in stored]
    assert listed.config_objects is None
    assert seen == [{"limit": "2"}, {"limit": "2", "continue": "2"}, {"limit": "2", "continue": "4"}]


async def test_an_expired_continue_token_falls_back_to_one_whole_list(api_server: ServerFactory) -> None:
    stored = [_workload(i) for i in range(3)]

    async def workloads(request: web.Request) -> web.Response:
        if "limit" not in request.query:
            return web.json_response({"metadata": {}, "items": stored})
        if request.query.get("continue"):
            return _status(410, "The provided continue parameter is too old to display a consistent list result.")
        return web.json_response({"metadata": {"continue": "stale"}, "items": stored[:2]})

    server = await api_server({f"{KUEUE}/workloads": workloads})
    listed = await read_cluster(_source(server), with_queues=False, page_size=2)
    assert [w.name for w in listed.workloads.workloads] == [w["metadata"]["name"] for w in stored]


@pytest.mark.parametrize(
    ("code", "server_message", "advice"),
    [
        (
            403,
            'workloads.kueue.x-k8s.io is forbidden: User "report" cannot list resource "workloads"',
            "grant the identity of --kubeconfig test.kubeconfig get and list on workloads.kueue.x-k8s.io",
        ),
        (401, "Unauthorized", "does not accept the credentials of --kubeconfig test.kubeconfig"),
        (404, "the server could not find the requested resource", "install kuota's CRDs"),
        (500, "etcdserver: request timed out", "see the API server's log"),
    ],
)
async def test_an_http_error_names_the_resource_the_server_message_and_what_to_do(
    api_server: ServerFactory, code: int, server_message: str, advice: str
) -> None:
    async def refuse(request: web.Request) -> web.Response:
        del request
        return _status(code, server_message)

    server = await api_server({f"{KUEUE}/workloads": refuse})
    with pytest.raises(KubernetesRequestError) as caught:
        await read_cluster(_source(server), with_queues=False)
    message = str(caught.value)
    assert f"listing workloads.kueue.x-k8s.io at {_source(server).access.server}: HTTP {code}" in message
    assert server_message in message
    assert advice in message
    assert caught.value.exit_code == 5


async def test_a_forbidden_queue_kind_fails_the_whole_read(api_server: ServerFactory) -> None:
    async def refuse(request: web.Request) -> web.Response:
        del request
        return _status(403, "cohorts.kueue.x-k8s.io is forbidden")

    server = await api_server({f"{KUEUE}/cohorts": refuse})
    with pytest.raises(KubernetesRequestError, match=re.escape("get and list on cohorts.kueue.x-k8s.io")):
        await read_cluster(_source(server), with_queues=True)


async def test_an_answer_that_is_not_a_list_is_an_error(api_server: ServerFactory) -> None:
    async def dashboard(request: web.Request) -> web.Response:
        del request
        return web.Response(text="<html>login</html>", content_type="text/html")

    server = await api_server({f"{KUEUE}/workloads": dashboard})
    with pytest.raises(KubernetesRequestError, match="not a Kubernetes list"):
        await read_cluster(_source(server), with_queues=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_unreachable_server_is_named_with_where_its_address_came_from() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(KubernetesUnreachableError) as caught:
        await read_cluster(_source(url), with_queues=True)
    assert f"the API server at {url} did not answer a list of" in str(caught.value)
    assert "check the server in --kubeconfig test.kubeconfig" in str(caught.value)


async def test_a_server_that_never_answers_times_out(api_server: ServerFactory) -> None:
    async def hang(request: web.Request) -> web.Response:
        del request
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    server = await api_server({f"{KUEUE}/workloads": hang})
    with pytest.raises(KubernetesUnreachableError, match="timed out"):
        await read_cluster(_source(server), with_queues=False, timeout_s=0.3)


def _live(kind: str, body: dict[str, Any], *, typed: bool = True) -> dict[str, Any]:
    """``body`` as the server lists it: its metadata, status and (for built-in kinds) no kind/apiVersion."""
    metadata = body.pop("metadata")
    listed = {
        "metadata": {
            **metadata,
            "uid": "0b6c",
            "resourceVersion": "812",
            "generation": 2,
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        },
        **body,
        "status": {"conditions": []},
    }
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, **listed} if typed else listed


async def test_queue_objects_come_back_as_config_the_simulator_reads(api_server: ServerFactory) -> None:
    lists = {
        f"{KUEUE}/resourceflavors": [
            _live("ResourceFlavor", {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu-type": "h100"}}})
        ],
        f"{KUEUE}/clusterqueues": [
            _live(
                "ClusterQueue",
                {
                    "metadata": {"name": "research"},
                    "spec": {
                        "cohortName": "gpus",
                        "namespaceSelector": {"matchLabels": {"team": "research"}},
                        "resourceGroups": [
                            {
                                "coveredResources": ["nvidia.com/gpu"],
                                "flavors": [
                                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
                                ],
                            }
                        ],
                    },
                },
            )
        ],
        f"{KUEUE}/localqueues": [
            _live(
                "LocalQueue",
                {"metadata": {"name": "default", "namespace": "research"}, "spec": {"clusterQueue": "research"}},
            )
        ],
        f"{KUEUE}/workloadpriorityclasses": [
            _live("WorkloadPriorityClass", {"metadata": {"name": "high"}, "value": 1000})
        ],
        "/api/v1/namespaces": [
            _live(
                "Namespace",
                {
                    "metadata": {"name": "research", "labels": {"team": "research"}},
                    "spec": {"finalizers": ["kubernetes"]},
                },
                typed=False,
            )
        ],
    }

    def serve(items: list[dict[str, Any]]) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            del request
            return web.json_response({"metadata": {"resourceVersion": "900"}, "items": items})

        return handler

    server = await api_server({path: serve(items) for path, items in lists.items()})
    listed = await read_cluster(_source(server), with_queues=True)
    assert listed.config_objects is not None
    assert [o["kind"] for o in listed.config_objects] == [
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Namespace",
    ]
    namespace = listed.config_objects[-1]
    assert namespace == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "research", "labels": {"team": "research"}},
        "spec": {"finalizers": ["kubernetes"]},
    }
    for obj in listed.config_objects:
        assert "status" not in obj
        assert set(obj["metadata"]) <= {"name", "namespace", "labels"}
        parse_object(obj)  # simulate's strict reader: raises on anything it would refuse
    assert namespace_queues(listed.config_objects) == {"research": "research"}


@pytest.mark.parametrize("content", [None, "", "clusters: []\n", "current-context: x\ncontexts: [{name: x}]\n"])
def test_an_unusable_kubeconfig_is_an_input_error_naming_it(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "broken.kubeconfig"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ReportInputError, match=re.escape(f"--kubeconfig {path} is not a usable kubeconfig")):
        api_source(path)


def test_in_cluster_outside_a_pod_says_to_pass_a_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ReportInputError, match=r"not running in a pod.*pass --kubeconfig PATH"):
        api_source(None, pod=True)


def _run_report(*args: str) -> tuple[int, str]:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(["report", *args])
    return code, stderr.getvalue()


def test_workloads_file_and_live_workloads_are_one_source_or_the_other(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "k.yaml"
    code, stderr = _run_report(
        "--prometheus",
        "http://127.0.0.1:1",
        "--kubeconfig",
        str(kubeconfig),
        "--workloads",
        str(tmp_path / "w.json"),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert "--workloads and --kubeconfig/--in-cluster both give the retained Workloads: pass one" in stderr


def test_kubeconfig_and_in_cluster_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited, contextlib.redirect_stderr(io.StringIO()):
        main(["report", "--prometheus", "http://p", "--kubeconfig", str(tmp_path / "k"), "--in-cluster"])
    assert exited.value.code == 2


async def test_a_forbidden_api_stops_the_report_before_prometheus_is_asked(
    api_server: ServerFactory, tmp_path: Path
) -> None:
    async def refuse(request: web.Request) -> web.Response:
        del request
        return _status(403, 'workloads.kueue.x-k8s.io is forbidden: User "nobody" cannot list resource')

    server = await api_server({f"{KUEUE}/workloads": refuse})
    kubeconfig = tmp_path / "nobody.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": str(server.make_url("")).rstrip("/")}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        ),
        encoding="utf-8",
    )
    unanswered_prometheus = f"http://127.0.0.1:{_closed_port()}"
    # main runs its own event loop: off this test's loop, which must keep serving the fake API server
    code, stderr = await asyncio.to_thread(
        _run_report,
        "--prometheus",
        unanswered_prometheus,
        "--kubeconfig",
        str(kubeconfig),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 5, stderr
    assert "HTTP 403" in stderr
    assert f"grant the identity of --kubeconfig {kubeconfig} get and list on workloads.kueue.x-k8s.io" in stderr
    assert "Prometheus" not in stderr
    assert not (tmp_path / "out").exists()
