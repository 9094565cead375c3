"""drax: a kube-scheduler extender for Kubernetes Dynamic Resource Allocation.

Data flows sources → inventory → allocator / topology → extender verbs → HTTP;
each subpackage is one of those stages (see docs/architecture.md).
"""

__version__ = "0.1.0"
