"""kombu's filesystem transport with atomic message files: the embedded run's serverless Celery broker.

kombu 5.7's ``kombu.transport.filesystem.Channel._put`` opens the final ``<ms>_<uuid>.<queue>.msg`` file and
only then writes the payload into it. A consumer polling the same folder (``Channel._get``) lists the folder,
moves the first matching file away and reads it; when it wins the race between the producer's ``open`` and
its ``write`` it reads zero bytes, ``loads(b"")`` raises ``JSONDecodeError('Expecting value: line 1 column
1 (char 0)')`` and a Celery worker stops with "Unrecoverable error" (the symptom of celery/kombu#1551,
https://github.com/celery/kombu/issues/1551). The producer's ``flock`` does not help: ``_get`` takes no lock.
Seen here: one producer and one consumer process on the stock transport, the consumer died after about
1,200-3,500 messages of 2 KB.

The fix: write the payload to ``<final name>.part`` in the same folder, then ``os.replace`` it to the final
name. A rename within one folder is atomic on POSIX, so the final name appears only with its whole payload,
and the consumer's filter (``filename.partition('.')[2] == '<queue>.msg'``, also used by ``_size`` and
``_purge``) never matches a ``.part`` file. A producer that dies between the write and the rename leaves a
``.part`` file that no consumer ever reads (the message was never sent).

Selected by ``CELERY_BROKER_TRANSPORT = "portal.broker:Transport"`` (Celery passes ``broker_transport`` to
``kombu.Connection(transport=…)``, and ``kombu.transport.resolve_transport`` imports a dotted class path);
the URL stays ``filesystem://`` because kombu refuses import paths in a URL scheme.
"""

from __future__ import annotations

import os
import uuid
from contextlib import suppress
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

#: Suffix of a message file still being written; the consumer's ``<queue>.msg`` filter ignores it.
PARTIAL_SUFFIX = ".part"


class Channel(filesystem.Channel):
    """A filesystem channel whose messages appear in the folder only when completely written."""

    # kombu's filesystem Channel names the argument ``payload`` where its virtual base says ``message``;
    # this keeps the filesystem signature, which no single override can reconcile with both.
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        """Write ``payload`` (a kombu message dict, JSON-encoded) as one new message file of ``queue``.

        Same file name and folder as kombu's own ``_put``; raises ``ChannelError`` when the file cannot be
        written or renamed (the partial file is removed then).
        """
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    """kombu's filesystem transport using :class:`Channel` (atomic message files)."""

    Channel = Channel
