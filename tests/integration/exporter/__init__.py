"""End to end: the exporter against the real control plane, fake NVML, a real kubelet gRPC fake and Prometheus."""
