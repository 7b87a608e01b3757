"""kuota: fair GPU sharing for Kubernetes. This package holds only the ``kuota`` command's front door."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kuota")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
