"""The report's exceptions: one small tree, so ``kuota report`` can turn each into a clear message and exit code.

::

    ReportError                 anything that stops the report; the message says what to do
    ├── ReportInputError        a flag, file or config the user gave is unusable (exit 2)
    │   └── UnreadableWorkloadError   one retained Workload cannot be read; the readers count it and leave it
    │                                 out (a warning names the item and the field), so it never stops a report
    ├── PrometheusError         Prometheus could not answer (exit 3)
    │   ├── PrometheusUnreachableError   no HTTP answer (connection refused, DNS, timeout)
    │   ├── PrometheusAccessError        the TLS handshake failed, or the credentials were refused (401, 403)
    │   └── PrometheusQueryError         for one query (named): an HTTP or PromQL error, an answer too large
    │                                    or of the wrong shape, or a value the figure cannot have
    ├── WhatIfError             ``kuota simulate`` could not replay the window's demand (exit 4)
    └── KubernetesError         the API server could not give the Workloads or queue objects (exit 5)
        ├── KubernetesUnreachableError   no HTTP answer (connection refused, TLS, timeout)
        └── KubernetesRequestError       an HTTP error for one list (401, 403, 404...; the resource is named)
"""

from __future__ import annotations

from kuota.errors import KuotaError


class ReportError(KuotaError):
    """Base of every error the report raises on purpose."""

    exit_code = 1


class ReportInputError(ReportError):
    exit_code = 2


class UnreadableWorkloadError(ReportInputError):
    """``why`` is the same for every item with this fault (reasons are counted); ``detail`` names the item."""

    def __init__(self, why: str, detail: str) -> None:
        super().__init__(f"{why}: {detail}")
        self.why = why
        self.detail = detail


class PrometheusError(ReportError):
    exit_code = 3


class PrometheusUnreachableError(PrometheusError):
    pass


class PrometheusAccessError(PrometheusError):
    pass


class PrometheusQueryError(PrometheusError):
    pass


class WhatIfError(ReportError):
    exit_code = 4


class KubernetesError(ReportError):
    exit_code = 5


class KubernetesUnreachableError(KubernetesError):
    pass


class KubernetesRequestError(KubernetesError):
    pass
