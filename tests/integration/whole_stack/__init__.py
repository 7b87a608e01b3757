"""The whole stack on the test control plane: manager, exporters, Prometheus and the report, end to end."""
