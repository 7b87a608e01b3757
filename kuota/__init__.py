"""kuota: fair GPU sharing for Kubernetes, one import root over its planes (``docs/architecture.md``).

:mod:`kuota.webhook` (admission plane), :mod:`kuota.engine` (pure quota engine), :mod:`kuota.simulator` (its
offline shell), :mod:`kuota.exporter` (node plane), :mod:`kuota.report`, :mod:`kuota.certs` and
:mod:`kuota.kube` (Kubernetes access); here: the ``kuota`` command (:mod:`kuota.cli`), the root of the
exception tree (:mod:`kuota.errors`), and what every plane shares: the small parsers (:mod:`kuota.durations`,
:mod:`kuota.addresses`), the one way to write a file (:mod:`kuota.files`), to serve HTTP
(:mod:`kuota.http_serving`) and to give freed memory back (:mod:`kuota.malloc_trim`)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kuota")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
