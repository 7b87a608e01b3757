"""The root of every error kuota raises, and the whole tree, so a caller knows exactly what to catch.

Each package has one module that defines its part of the tree (named below); every class derives from
:class:`KuotaError`, and every message names the object or field at fault and says what to do::

    KuotaError
    ├── kuota.durations.DurationError      a text is not a duration (also a ValueError)
    ├── kuota.addresses.AddressError       a text is not HOST:PORT (also a ValueError)
    ├── ConfigurationError                 a setting (flag, file, kubeconfig) is unusable
    │   ├── kuota.kube.errors.KubeconfigError
    │   └── kuota.exporter.errors.ExporterConfigurationError
    ├── kuota.kube.errors.KubeError        Kubernetes access
    │   ├── KubeconfigError
    │   └── KubeApiError                   CredentialPluginError, ApiUnreachableError, and ApiResponseError
    │                                      typed by status: NotFound, Conflict (AlreadyExists), Gone, Forbidden,
    │                                      Unauthorized, Unavailable, BadRequest, MalformedResponse
    ├── kuota.engine.errors.EngineError    InvalidObjectError (API-server wording), UnknownObjectError
    ├── kuota.simulator.errors.SimulateError   ConfigFileError, WorkloadFileError, TraceFormatError, SourceSpecError
    ├── kuota.webhook.admission.errors.AdmissionError   MalformedReviewError, MalformedObjectError
    ├── kuota.webhook.controller.errors.ControllerError   ApiWriteError (StaleObjectError), JobConflictError
    ├── kuota.webhook.conversion.errors.ConversionError   MalformedConversionReviewError, UnconvertibleObjectError
    ├── kuota.webhook.visibility.errors.VisibilityError   BadQueryError, Unauthenticated, FrontProxyConfigError
    ├── kuota.webhook.manager.ManagerError
    ├── kuota.webhook.controller.leader_election.LostLeadershipError
    ├── kuota.exporter.errors.ExporterError   NVML, PodResources and pod-watch failures
    ├── kuota.report.errors.ReportError    ReportInputError, PrometheusError, WhatIfError, KubernetesError
    └── kuota.certs.errors.CertsError      CertificateMaterialError, CertificateStoreError, CaBundleInjectionError

``tests/unit/test_errors.py`` checks that no package raises an exception class outside this tree.
"""

from __future__ import annotations


class KuotaError(Exception):
    """Base of every error raised by kuota."""


class ConfigurationError(KuotaError):
    """A setting is unusable; the message names it and says what to do."""
