"""``kuota report``: the weekly buy-versus-tune report read from Prometheus and the job history.

Data flows ``sources`` -> ``figures`` -> ``writers``, and ``pipeline`` runs one report through them; ``commands``
is the CLI (argparse only at import time). Imports go down this list, never up (import-linter holds it,
``pyproject.toml``):

- ``commands``, then ``pipeline``;
- ``sources`` and ``writers``, neither importing the other. ``sources`` read Prometheus (its HTTP API, the PromQL
  asked), the API server and the ``--config``, ``--workloads`` and ``--previous`` files, and replay the what-if
  through the simulator, into the figures' inputs; ``writers`` render report.json, report.csv, report.md,
  report.html and the SVG charts;
- ``figures``, the functional core, pure (no I/O, no clock): measurements in, every figure, verdict and lever
  out; ``figures.schema`` is report.json's shape;
- ``errors``: the report's exceptions.
"""
