"""``kuota report``: the weekly buy-versus-tune report read from Prometheus and the job history.

Layers, lowest first (a module imports only from layers above it in this list, never below):

- ``errors``, ``quoting``, ``window``, ``prices``, ``statistics``, ``measurements``: plain data and pure helpers;
- ``promql`` (the queries, as strings), ``verdicts`` (quadrant and levers), ``team_report`` (measurements ->
  every figure of the report), ``queue_config`` (LocalQueues -> teams; listed objects -> config),
  ``workload_history`` (Workloads read once, each checked -> simulate records, failed GPU-hours),
  ``whatif``'s config rewrites: the functional core, no I/O;
- ``prometheus_api`` (HTTP, timeouts, answers bounded and parsed strictly), ``collection`` (which series
  exist, run the queries, what NaN means per query), ``api_listing`` (retained Workloads and queue objects
  from the API server), ``workload_dump`` (a ``--workloads`` file, read a chunk at a time), ``whatif``'s
  replay (the simulator's ``simulate``, in process): the imperative shell;
- ``report_json``, ``report_markdown``, ``svg_charts`` + ``report_html``: writers of the three files;
- ``pipeline`` ties one run together; ``commands`` is the CLI (argparse only at import time).
"""
