"""The report's figures, the functional core (pure: no I/O, no clock): the window (``window``), what Prometheus
answered (``measurements``), prices (``prices``), quantiles (``quantiles``), verdicts and levers (``verdicts``),
every figure per team and for the cluster (``team_report``), the week-over-week comparison
(``week_over_week``), and report.json's shape (``schema``)."""
