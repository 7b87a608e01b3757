"""Unit tests of the node exporter: no cluster, fake NVML through the real pynvml."""
