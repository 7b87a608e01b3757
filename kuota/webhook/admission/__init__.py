"""The AdmissionReview server: Job defaulting and validation, and validation of the queueing objects.

Layers, lowest first (a module imports only from the ones above it in this list):

- :mod:`~kuota.webhook.admission.errors` — the exception tree.
- :mod:`~kuota.webhook.admission.reviews` — parse an ``admission.k8s.io/v1`` AdmissionReview into a typed request;
  build the response. Pure.
- :mod:`~kuota.webhook.admission.json_patch` — RFC 6901 pointers and RFC 6902 operations. Pure.
- :mod:`~kuota.webhook.admission.cluster_facts` — the read-only cluster facts the Job rules need (a protocol).
- :mod:`~kuota.webhook.admission.job_policy` — the Job rules (queue-name/priority-class defaulting, suspension,
  immutability while admitted, who may unsuspend). Pure: it reads cluster state only through
  :class:`~kuota.webhook.admission.cluster_facts.ClusterFacts`.
- :mod:`~kuota.webhook.admission.kueue_validation` — ResourceFlavor/ClusterQueue/LocalQueue/Cohort/Workload
  validation, delegated to the quota engine's validators so that there is one code path.
- :mod:`~kuota.webhook.admission.server` — the aiohttp application: TLS 1.2+, body cap, /healthz, /readyz,
  served through :mod:`kuota.http_serving` (header and body deadlines, a bound on slow bodies).
- :mod:`~kuota.webhook.admission.endpoints` — kuota's paths, their rules, and the webhook configurations.
- :mod:`~kuota.webhook.admission.reflected_cluster` — ``ClusterFacts`` over :mod:`kuota.kube.reflector` caches.

Whatever arrives, the server answers with a well-formed AdmissionReview or an HTTP 4xx with a precise
message; it never answers 500 and never lets one request take the process down.
"""
