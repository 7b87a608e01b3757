"""Kubernetes access, the one place every part reaches the API server through.

- :mod:`~kuota.kube.client`: kubeconfig or in-cluster credentials, one aiohttp session, typed answers.
- :mod:`~kuota.kube.errors`: the typed errors the client raises (``NotFoundError``, ``ConflictError``, ...).
- :mod:`~kuota.kube.listing`: the one paginated list (``limit``/``continue``, restarted when its token expires).
- :mod:`~kuota.kube.reflector`: list, then watch, into an in-memory cache.

Nothing here knows Kueue's API or kuota's policy: callers pass paths and objects.
"""
