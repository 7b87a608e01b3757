"""The admission plane: the AdmissionReview server, the quota controller over :mod:`kuota.engine`, the CRDs and
the manager that runs them (``kuota manager``)."""
