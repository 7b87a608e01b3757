"""The node plane only: NVML readings, process-to-pod attribution, Prometheus exposition (``kuota exporter``)."""
