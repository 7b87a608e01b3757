"""What the report reads, the imperative shell: Prometheus (``prometheus_access``, ``prometheus_api``, the queries
in ``promql``, run and typed into measurements by ``collection``), the API server (``api_listing``), the files
given (``queue_config``, ``workload_dump``, ``previous_report``), the retained Workloads decoded into the job
history (``workload_history``), and the what-if's replays through the simulator (``whatif``)."""
