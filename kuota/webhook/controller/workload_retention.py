"""Deleting Workloads that finished longer ago than the retention: a finished Workload otherwise stays until its
Job is deleted, which may be never, and every one left is held in memory by each watcher and returned by each
list. The report reads those kept as history.
"""

from __future__ import annotations

import logging

from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter
from kuota.webhook.controller.errors import StaleObjectError
from kuota.webhook.controller.state import NewestCopies, key_of

log = logging.getLogger(__name__)


async def expire_finished(reporter: ApiWriter, workloads: NewestCopies, now: float, retention: float) -> None:
    """Delete Workloads finished longer ago than ``retention`` seconds (the report reads the rest as history)."""
    horizon = now - retention
    expired = []
    for obj in workloads.finished():
        finished = status.condition(obj.get("status", {}).get("conditions") or [], "Finished")
        at = status.parse_time(finished.get("lastTransitionTime")) if finished else None
        if finished is not None and finished.get("status") == "True" and at is not None and at < horizon:
            expired.append(obj)
    for obj in expired:
        metadata = obj["metadata"]
        try:
            await reporter.delete(WORKLOADS, metadata["namespace"], metadata["name"], metadata["resourceVersion"])
            log.info("deleted %s, finished over %.0fh ago", key_of(obj), retention / 3600)
        except StaleObjectError:
            continue  # changed or gone meanwhile: judged again next round
