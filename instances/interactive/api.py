"""API pieces of interactive access: the ``ssh`` field of an instance (``instances.api.serializers``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from instances.interactive.ssh import ssh_access


class SshAccessSerializer(serializers.Serializer[Any]):
    command = serializers.CharField(help_text="`ssh -p PORT USER@HOST` once the server listens, else empty")
    host = serializers.CharField()
    port = serializers.IntegerField(allow_null=True)
    username = serializers.CharField()
    host_key_fingerprint = serializers.CharField(help_text="SHA256:… of the instance's Ed25519 host key")
    reason = serializers.CharField(help_text="why there is no command yet; empty when there is one")


@extend_schema_field(SshAccessSerializer(allow_null=True))
class SshAccessField(serializers.Field):  # type: ignore[type-arg]
    """How to log in with SSH (``null`` for instances without an SSH server: training jobs)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Any) -> dict[str, Any] | None:
        access = ssh_access(value)
        return asdict(access) if access is not None else None
