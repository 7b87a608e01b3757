"""TLS for the webhook: CA and serving certificates, rotation, and caBundle injection.

The API server only calls a webhook it can verify, so every replica must serve a certificate signed by the
CA in the webhook configurations' ``caBundle``. Two sources are supported:

- :class:`kuota.certs.rotation.SecretBackedCertificates` generates a self-signed CA and serving pair, keeps them
  in one Secret so that replicas agree (the first writer wins a create race; the others adopt its pair),
  renews well before expiry, hot-reloads the live :class:`ssl.SSLContext` and injects the CA into kuota's
  Mutating/ValidatingWebhookConfigurations.
- :class:`kuota.certs.rotation.DirectoryCertificates` reads ``tls.crt``/``tls.key`` written by cert-manager into
  ``--cert-dir`` and reloads them when they change; it generates nothing.

The pure part (issuing, parsing, deciding when to renew) lives in :mod:`kuota.certs.authority`; the
:mod:`kuota.certs.errors` docstring draws the exception tree.
"""
