"""A fake ``libnvidia-ml.so.1`` (C, compiled by the test run) and the scenario files that drive it."""
