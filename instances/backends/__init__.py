"""Compute backends behind one interface; see :mod:`instances.backends.base`."""

from instances.backends.base import (
    BackendError,
    ComputeBackend,
    DatasetMount,
    JobSpec,
    JobStatus,
    UnknownHandle,
    get_backend,
)

__all__ = [
    "BackendError",
    "ComputeBackend",
    "DatasetMount",
    "JobSpec",
    "JobStatus",
    "UnknownHandle",
    "get_backend",
]
