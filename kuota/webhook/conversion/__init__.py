"""The ``kueue.x-k8s.io`` conversion webhook: v1beta1 objects (Kueue 0.14 and older) read and written as v1beta2.

v1beta2 is the storage version; the API server sends a ConversionReview to ``/convert`` whenever a client asks
for, or writes, the other version. Layers, lowest first:

- :mod:`~kuota.webhook.conversion.errors` — the exception tree.
- :mod:`~kuota.webhook.conversion.kinds` — each kind's field renames, both ways. Pure.
- :mod:`~kuota.webhook.conversion.reviews` — parse an ``apiextensions.k8s.io/v1`` ConversionReview, convert
  its objects, build the response. Pure.
- :mod:`~kuota.webhook.conversion.endpoint` — the ``POST /convert`` route on the admission server's application.

Whatever arrives, the answer is a ConversionReview: ``result.status: Failure`` with a message naming the
problem, never an HTTP 500.
"""
