"""An upload handler that stops a request body as soon as a file passes ``DATASET_UPLOAD_MAX_BYTES``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload


class SizeLimitUploadHandler(FileUploadHandler):
    """Counts file bytes as Django streams them and aborts the upload past the limit (the temporary file is
    discarded by Django); the view then reports the limit. Put first in ``request.upload_handlers``."""

    def __init__(self, request: Any = None) -> None:
        super().__init__(request)
        self.limit: int = settings.DATASET_UPLOAD_MAX_BYTES
        self.received = 0
        self.exceeded = False

    def handle_raw_input(
        self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: str | None = None
    ) -> None:
        # A body far larger than the limit is marked at once; reading stops at the first chunk past it.
        if content_length and content_length > self.limit + 1024 * 1024:
            self.exceeded = True

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
