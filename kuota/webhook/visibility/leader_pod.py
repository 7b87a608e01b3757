"""The label that routes the visibility API to the replica that can answer it.

Only the replica running the controller has an engine to answer from; a follower's is empty. So in a cluster
the visibility Service selects, besides the manager's labels, ``kuota.dev/visibility-serving: "true"``, which
each replica keeps on its own Pod exactly while it answers (leader, controller synced) and removes otherwise:
at start (a restarted container keeps its Pod's labels), on losing the Lease, and once it can reach the API
server again after a partition. A replica that answers 503 meanwhile (between a leader's loss and its
label's removal) is the only window in which the API server may reach a follower.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kuota.webhook.controller.api_writes import ApiWriter, Resource
from kuota.webhook.controller.errors import ApiWriteError

log = logging.getLogger(__name__)

SERVING_LABEL = "kuota.dev/visibility-serving"
PODS = Resource("", "v1", "pods")
_CHECK_SECONDS = 1.0


class ServingLabel:
    """Keeps :data:`SERVING_LABEL` on the Pod ``namespace/pod`` in step with ``serving()``."""

    def __init__(self, writer: ApiWriter, namespace: str, pod: str, serving: Callable[[], bool]) -> None:
        self._writer = writer
        self._namespace = namespace
        self._pod = pod
        self._serving = serving
        self.labelled: bool | None = None  # what the Pod was last patched to; None: not yet

    async def reconcile(self) -> None:
        wanted = self._serving()
        if wanted == self.labelled:
            return
        patch = {"metadata": {"labels": {SERVING_LABEL: "true" if wanted else None}}}
        try:
            await self._writer.merge_patch(PODS, self._namespace, self._pod, patch)
        except ApiWriteError as error:
            log.warning("could not %s Pod %s/%s's %s label: %s", "set" if wanted else "remove",
                        self._namespace, self._pod, SERVING_LABEL, error)  # fmt: skip
            return
        self.labelled = wanted
        log.info("Pod %s/%s %s the visibility API's traffic", self._namespace, self._pod,
                 "takes" if wanted else "no longer takes")  # fmt: skip

    async def run(self) -> None:
        while True:
            await self.reconcile()
            await asyncio.sleep(_CHECK_SECONDS)
