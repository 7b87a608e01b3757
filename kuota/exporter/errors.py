"""The exporter's exceptions. Catch :class:`ExporterError` for all of them::

    ExporterError
    ├── ExporterConfigurationError    a flag or environment variable is wrong; the message names it
    ├── NvmlUnavailableError          no usable NVML: library missing, driver not loaded, bindings newer than
    │                                 the driver; the exporter keeps serving and reports not-ready
    ├── NvmlReinitRequiredError       NVML answered "uninitialized" (driver reloaded): open it again
    ├── PodResourcesUnavailableError  the kubelet's PodResources socket did not answer; the exporter keeps
    │                                 serving and reports not-ready
    └── PodWatchError                 the API server answered a pod list or watch with an error (re-listed)

:class:`ExporterConfigurationError` extends :class:`kuota.errors.ConfigurationError`, which a bad kubeconfig
raises too: catch that for both. The whole tree is drawn in :mod:`kuota.errors`.
"""

from __future__ import annotations

from kuota.errors import ConfigurationError, KuotaError


class ExporterError(KuotaError):
    """Base of every error the exporter raises on purpose."""


class ExporterConfigurationError(ExporterError, ConfigurationError):
    """A setting is invalid (a kubeconfig problem is kuota's ConfigurationError, which this extends)."""


class NvmlUnavailableError(ExporterError):
    """NVML cannot be used on this node right now."""


class NvmlReinitRequiredError(ExporterError):
    """NVML lost its initialisation (typically a driver reload); the reader must be opened again."""


class PodResourcesUnavailableError(ExporterError):
    """The kubelet PodResources API could not be read."""


class PodWatchError(ExporterError):
    """The API server answered a pod list or watch with an error; the watch lists again."""
