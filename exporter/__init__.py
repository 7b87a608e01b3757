"""The node plane: NVML readings, process-to-pod attribution, Prometheus exposition, and the weekly report."""
