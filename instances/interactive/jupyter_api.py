"""The ``jupyter`` field of the instances API: ``{"state": "unavailable" | "starting" | "ready", "url": …}``.

``url`` is the console's door (``/o/<org>/instances/<id>/jupyter/``, absolute when the request is known): a
member's browser opening it gets a single-use ticket and lands in JupyterLab. It is ``null`` while the state is
not ``ready``. The state comes from :func:`instances.interactive.jupyter.jupyter_state` (for a running instance
with Jupyter: one query for its attempt and one probe of the server, at most ``PROBE_TIMEOUT_S`` seconds).
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from instances.interactive.jupyter import jupyter_state
from instances.models import Instance


class JupyterAccessSerializer(serializers.Serializer[Any]):
    """Shape of the field, for the OpenAPI schema."""

    state = serializers.ChoiceField(choices=["unavailable", "starting", "ready"])
    url = serializers.URLField(allow_null=True)


@extend_schema_field(JupyterAccessSerializer)
class JupyterAccessField(serializers.Field):  # type: ignore[type-arg]
    """Read-only; use with ``source="*"`` (the instance itself)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.update(source="*", read_only=True)
        super().__init__(**kwargs)

    def to_representation(self, value: Instance) -> dict[str, Any]:
        state = jupyter_state(value)
        url = None
        if state == "ready":
            url = reverse("instance_jupyter", kwargs={"org": value.organization.slug, "pk": value.pk})
            request = self.context.get("request")
            if request is not None:
                url = request.build_absolute_uri(url)
        return {"state": state, "url": url}
