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
import logging
import signal
from typing import Any

from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.cluster.nodes import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION

log = logging.getLogger("pod-lifecycle")

_PARALLEL_WRITES = 16


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": _now()}


class PodLifecycle:
    def __init__(self, api: client.CoreV1Api) -> None:
        self._api = api
        self._writes = asyncio.Semaphore(_PARALLEL_WRITES)
        self._started: set[str] = set()
        self._finishing: set[str] = set()
        self._deleting: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def observe(self, pod: Any) -> None:
        uid = pod.metadata.uid
        phase = pod.status.phase if pod.status else None
        if pod.metadata.deletion_timestamp is not None:
            if uid not in self._deleting:
                self._deleting.add(uid)
                self._spawn(self._delete(pod.metadata.namespace, pod.metadata.name, uid))
            return
        if phase in ("Succeeded", "Failed"):
            return
        if phase != "Running" and uid not in self._started:
            self._started.add(uid)
            self._spawn(self._start(pod))
        elif phase == "Running" and uid not in self._finishing:
            self._schedule_finish(pod)

    def _schedule_finish(self, pod: Any) -> None:
        annotations = pod.metadata.annotations or {}
        if RUN_SECONDS_ANNOTATION not in annotations:
            return
        self._finishing.add(pod.metadata.uid)
        run_seconds = float(annotations[RUN_SECONDS_ANNOTATION])
        exit_code = int(annotations.get(EXIT_CODE_ANNOTATION, "0"))
        started = pod.status.start_time
        elapsed = (datetime.datetime.now(datetime.UTC) - started).total_seconds() if started else 0.0
        self._spawn(self._finish(pod, max(0.0, run_seconds - elapsed), exit_code))

    async def _write(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        async with self._writes:
            try:
                await self._api.patch_namespaced_pod_status(name, namespace, body)
            except ApiException as error:
                if error.status != 404:  # the pod went away meanwhile: nothing to drive
                    log.warning("status write for %s/%s failed: %s", namespace, name, error.reason)

    async def _start(self, pod: Any) -> None:
        containers = [
            {
                "name": container.name,
                "image": container.image or "fake",
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": _now()}},
            }
            for container in pod.spec.containers
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
        await self._write(pod.metadata.name, pod.metadata.namespace, {"status": status})

    async def _finish(self, pod: Any, delay: float, exit_code: int) -> None:
        await asyncio.sleep(delay)
        containers = [
            {
                "name": container.name,
                "image": container.image or "fake",
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
            for container in pod.spec.containers
        ]
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": [_condition("Ready", "False"), _condition("ContainersReady", "False")],
            "containerStatuses": containers,
        }
        await self._write(pod.metadata.name, pod.metadata.namespace, {"status": status})

    async def _delete(self, namespace: str, name: str, uid: str) -> None:
        async with self._writes:
            try:
                # The grace period goes in the body: with a body, the API server ignores the query parameters.
                options = client.V1DeleteOptions(grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid))
                await self._api.delete_namespaced_pod(name, namespace, body=options)
            except ApiException as error:
                if error.status not in (404, 409):
                    log.warning("delete of %s/%s failed: %s", namespace, name, error.reason)

    async def run(self) -> None:
        while True:
            try:
                listing = await self._api.list_pod_for_all_namespaces(field_selector="spec.nodeName!=")
                for pod in listing.items:
                    self.observe(pod)
                version = listing.metadata.resource_version
                async with watch.Watch() as stream:
                    async for event in stream.stream(
                        self._api.list_pod_for_all_namespaces,
                        field_selector="spec.nodeName!=",
                        resource_version=version,
                        timeout_seconds=300,
                    ):
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self.observe(event["object"])
            except ApiException as error:
                log.info("pod watch restarts after %s", error.reason)
            except (TimeoutError, OSError) as error:
                log.warning("pod watch lost the apiserver (%s); retrying", error)
                await asyncio.sleep(0.5)


async def _main(kubeconfig: str) -> None:
    await config.load_kube_config(config_file=kubeconfig)
    async with client.ApiClient() as api_client:
        lifecycle = PodLifecycle(client.CoreV1Api(api_client))
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
