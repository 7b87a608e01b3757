"""Stands in for the kubelet on fake nodes: bound pods go Running, then Succeeded (or Failed) after the
number of seconds in their ``kuota.test/run-seconds`` annotation, or stay Running without one; pods being
deleted are removed at once, as a kubelet would after its containers stop.

Runs as its own process (``python -m tests.cluster.pod_lifecycle --kubeconfig K``) so that it keeps working
while a test blocks its own event loop, and so the control plane can be left running for a person.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import signal
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from kuota.kube.client import KubeApi
from kuota.kube.errors import ApiUnreachableError, KubeApiError
from tests.cluster.nodes import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION

log = logging.getLogger("pod-lifecycle")

_PARALLEL_WRITES = 16
_PODS = "/api/v1/pods"
_ON_NODES = {"fieldSelector": "spec.nodeName!="}
_WATCH_SECONDS = 300


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": _now()}


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


class PodLifecycle:
    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self._writes = asyncio.Semaphore(_PARALLEL_WRITES)
        self._started: set[str] = set()
        self._finishing: set[str] = set()
        self._deleting: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def observe(self, pod: Mapping[str, Any]) -> None:
        metadata = pod["metadata"]
        uid = metadata["uid"]
        phase = (pod.get("status") or {}).get("phase")
        if metadata.get("deletionTimestamp"):
            if uid not in self._deleting:
                self._deleting.add(uid)
                self._spawn(self._delete(metadata["namespace"], metadata["name"], uid))
            return
        if phase in ("Succeeded", "Failed"):
            return
        if phase != "Running" and uid not in self._started:
            self._started.add(uid)
            self._spawn(self._start(pod))
        elif phase == "Running" and uid not in self._finishing:
            self._schedule_finish(pod)

    def _schedule_finish(self, pod: Mapping[str, Any]) -> None:
        annotations = pod["metadata"].get("annotations") or {}
        if RUN_SECONDS_ANNOTATION not in annotations:
            return
        self._finishing.add(pod["metadata"]["uid"])
        run_seconds = float(annotations[RUN_SECONDS_ANNOTATION])
        exit_code = int(annotations.get(EXIT_CODE_ANNOTATION, "0"))
        started = (pod.get("status") or {}).get("startTime")
        elapsed = (
            (datetime.datetime.now(datetime.UTC) - datetime.datetime.fromisoformat(started)).total_seconds()
            if started
            else 0.0
        )
        self._spawn(self._finish(pod, max(0.0, run_seconds - elapsed), exit_code))

    async def _write(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        async with self._writes:
            try:
                # Strategic merge, as a kubelet's status update: conditions merge by type.
                response = await self._api.request(
                    "PATCH",
                    f"{_pod_path(namespace, name)}/status",
                    body=body,
                    content_type="application/strategic-merge-patch+json",
                )
            except ApiUnreachableError as error:
                log.warning("status write for %s/%s failed: %s", namespace, name, error)
                return
            if not response.ok and response.status != 404:  # 404: the pod went away meanwhile, nothing to drive
                log.warning("status write for %s/%s failed: %s", namespace, name, response.message())

    @staticmethod
    def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        containers: list[Mapping[str, Any]] = pod["spec"]["containers"]
        return containers

    async def _start(self, pod: Mapping[str, Any]) -> None:
        containers = [
            {
                "name": container["name"],
                "image": container.get("image") or "fake",
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": _now()}},
            }
            for container in self._containers(pod)
        ]
        status = {
            "phase": "Running",
            "startTime": _now(),
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "conditions": [
                _condition("PodScheduled"),
                _condition("Initialized"),
                _condition("ContainersReady"),
                _condition("Ready"),
            ],
            "containerStatuses": containers,
        }
        await self._write(pod["metadata"]["name"], pod["metadata"]["namespace"], {"status": status})

    async def _finish(self, pod: Mapping[str, Any], delay: float, exit_code: int) -> None:
        await asyncio.sleep(delay)
        containers = [
            {
                "name": container["name"],
                "image": container.get("image") or "fake",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "finishedAt": _now(),
                    }
                },
            }
            for container in self._containers(pod)
        ]
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": [_condition("Ready", "False"), _condition("ContainersReady", "False")],
            "containerStatuses": containers,
        }
        await self._write(pod["metadata"]["name"], pod["metadata"]["namespace"], {"status": status})

    async def _delete(self, namespace: str, name: str, uid: str) -> None:
        # The grace period goes in the body: with a body, the API server ignores the query parameters.
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        async with self._writes:
            try:
                response = await self._api.request("DELETE", _pod_path(namespace, name), body=options)
            except ApiUnreachableError as error:
                log.warning("delete of %s/%s failed: %s", namespace, name, error)
                return
            if not response.ok and response.status not in (404, 409):
                log.warning("delete of %s/%s failed: %s", namespace, name, response.message())

    async def run(self) -> None:
        while True:
            try:
                await self._list_and_watch()
            except KubeApiError as error:
                log.warning("pod watch lost the apiserver (%s); retrying", error)
                await asyncio.sleep(0.5)

    async def _list_and_watch(self) -> None:
        listing = await self._api.request("GET", _PODS, query=_ON_NODES)
        if not listing.ok:
            log.info("pod list failed: %s; listing again", listing.message())
            await asyncio.sleep(0.5)
            return
        document = listing.object()
        for pod in document["items"]:
            self.observe(pod)
        query = {
            **_ON_NODES,
            "watch": "true",
            "resourceVersion": document["metadata"]["resourceVersion"],
            "timeoutSeconds": str(_WATCH_SECONDS),
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=_WATCH_SECONDS + 30)
        async with self._api.stream("GET", _PODS, query=query, client_timeout=timeout) as stream:
            if stream.status != 200:
                log.info("pod watch restarts after %s", (await stream.read()).message())
                return
            async for line in stream.lines():
                event = json.loads(line)
                if event["type"] == "ERROR":
                    log.info("pod watch restarts after %s", event["object"].get("message"))
                    return
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.observe(event["object"])


async def _main(kubeconfig: str) -> None:
    async with KubeApi.from_kubeconfig(Path(kubeconfig)) as api:
        lifecycle = PodLifecycle(api)
        runner = asyncio.create_task(lifecycle.run())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        runner.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s pod-lifecycle %(levelname)s %(message)s")
    asyncio.run(_main(parser.parse_args().kubeconfig))
