"""The serving label follows whether the replica answers: patched only on a change, removed at start, retried
after a failed write."""

from __future__ import annotations

import json
from typing import Any, cast

from kuota.kube.client import ApiResponse, KubeApi
from kuota.webhook.controller.api_writes import ApiWriter
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.visibility.leader_pod import SERVING_LABEL, ServingLabel

POD = "/api/v1/namespaces/kuota-system/pods/kuota-manager-0"


class _ApiServer:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, Any]] = []
        self.refuse = False

    async def request(self, method: str, path: str, *, body: Any, content_type: str, **_: Any) -> ApiResponse:
        self.patches.append((method, path, body))
        assert content_type == "application/merge-patch+json"
        if self.refuse:
            return ApiResponse(method, path, 403, json.dumps({"kind": "Status", "message": "forbidden"}).encode())
        return ApiResponse(method, path, 200, b"{}")


async def test_the_label_follows_serving_and_is_patched_only_on_a_change() -> None:
    api = _ApiServer()
    serving = False
    label = ServingLabel(
        ApiWriter(cast(KubeApi, api), ControllerMetrics(), attempts=1), "kuota-system", "kuota-manager-0",
        lambda: serving,
    )  # fmt: skip
    await label.reconcile()  # at start: removed, whatever a previous container left
    assert api.patches == [("PATCH", POD, {"metadata": {"labels": {SERVING_LABEL: None}}})]
    await label.reconcile()
    assert len(api.patches) == 1
    serving = True
    api.refuse = True
    await label.reconcile()
    assert label.labelled is False  # the write failed: tried again next time
    api.refuse = False
    await label.reconcile()
    assert api.patches[-1] == ("PATCH", POD, {"metadata": {"labels": {SERVING_LABEL: "true"}}})
    assert label.labelled is True and len(api.patches) == 3
