"""Cursor pagination shared by list endpoints (stable under inserts, opaque cursors)."""

from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    """Newest first by primary key; ``?cursor=…&page_size=…`` (max 200)."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
