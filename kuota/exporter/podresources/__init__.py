"""The kubelet PodResources API: generated messages and stubs, and the exporter's client."""
