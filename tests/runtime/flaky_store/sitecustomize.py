"""A checkpoint store that fails reads: the ``flaky://`` fsspec protocol (a local folder underneath).

Put this folder on ``PYTHONPATH`` and Python imports it at start-up (``sitecustomize``), in every rank.
``FLAKY_STORE_FAILS`` names a counter file: while it holds a number > 0, each file opened for reading fails
with ``OSError(EIO)`` and the number goes down by one; ``-1`` fails every read. Writes always work.
"""

from __future__ import annotations

import errno
import fcntl
import os

import fsspec
from fsspec.implementations.local import LocalFileSystem


def _take_failure() -> bool:
    counter = os.environ.get("FLAKY_STORE_FAILS")
    if not counter:
        return False
    with open(counter, "r+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        left = int(fh.read().strip() or 0)
        if left == 0:
            return False
        if left > 0:
            fh.seek(0)
            fh.truncate()
            fh.write(str(left - 1))
        return True


class FlakyFileSystem(LocalFileSystem):
    protocol = ("flaky",)

    def _open(self, path, mode="rb", **kwargs):
        if "r" in mode and _take_failure():
            raise OSError(errno.EIO, f"injected read error on {path}")
        return super()._open(path, mode, **kwargs)


fsspec.register_implementation("flaky", FlakyFileSystem, clobber=True)
