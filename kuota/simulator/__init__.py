"""``kuota simulate``: replays workloads through the quota engine in simulated time."""
