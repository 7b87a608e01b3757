"""Fake hardware and node services for tests: NVML, /proc trees, the kubelet's PodResources API."""
