"""kuota: fair GPU sharing for Kubernetes. This package holds the ``kuota`` command's front door and what the
manager, the exporter and the report share: the Kubernetes API client (:mod:`kuota.kube_api`) and its errors."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kuota")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
