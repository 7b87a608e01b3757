"""Kueue's visibility API (``visibility.kueue.x-k8s.io`` v1beta1 and v1beta2), served by the manager as an
aggregated API: the pending workloads of a ClusterQueue or LocalQueue, in the order the engine admits them.

- :mod:`pending`: the order, positions and ``limit``/``offset`` windows, in Kueue's response shapes;
- :mod:`front_proxy`: who is asking, as the API server's front proxy vouches (requestheader authentication);
- :mod:`routes`: the discovery documents and the two ``pendingworkloads`` subresources, each checked with a
  SubjectAccessReview for the user the front proxy named.
"""
