"""Errors of instance and job operations (each carries what the console and the API show)."""

from __future__ import annotations


class LaunchError(ValueError):
    """A launch request was refused before anything was created. ``code`` is machine-readable, ``field``
    names the offending input ("" for the request as a whole)."""

    def __init__(self, code: str, message: str, field_name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.field = field_name


class RollbackError(ValueError):
    """A rollback names no usable checkpoint of this job. ``available_steps``: the steps it could use
    (ascending; empty when unknown or none)."""

    def __init__(self, message: str, *, available_steps: list[int] | None = None) -> None:
        super().__init__(message)
        self.available_steps = list(available_steps or [])


class NotRunning(ValueError):
    """An operation that needs a running job (a checkpoint now) was asked of one that is not running."""


class CallbackRefused(Exception):
    """A runtime callback had a missing or wrong token (HTTP 401) or a bad body (HTTP 400)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
