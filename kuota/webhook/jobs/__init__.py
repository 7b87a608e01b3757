"""The job adapter layer: what each managed kind (batch/v1 Job, Pod and pod groups, JobSet, RayJob, ...) means to
the queue, behind one interface, so the webhook and the controller work on
:class:`~kuota.webhook.jobs.adapter.JobAdapter` and never on a kind (the counterpart of Kueue's job framework;
docs/architecture.md, "The job adapters").

- :mod:`~kuota.webhook.jobs.adapter` — the interface, the pod sets a Workload is made of, the flavors' placement,
  Kueue's Workload naming, and the pure helpers every adapter shares.
- :mod:`~kuota.webhook.jobs.registry` — the adapters by Kueue's framework name and by GroupVersionKind, and the
  Configuration's ``integrations.frameworks`` read into the enabled set.
- one module per kind: :mod:`~kuota.webhook.jobs.batch_job`, :mod:`~kuota.webhook.jobs.pod`, ...; Deployment and
  StatefulSet, whose pods are gated for them, in :mod:`~kuota.webhook.jobs.pod_parents`.

Everything here is pure (JSON in, JSON and patches out); the shells do the I/O.
"""
