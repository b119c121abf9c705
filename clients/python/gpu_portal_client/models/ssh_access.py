from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SshAccess")


@_attrs_define
class SshAccess:
    """
    Attributes:
        command (str): `ssh -p PORT USER@HOST` once the server listens, else empty
        host (str):
        port (int | None):
        username (str):
        host_key_fingerprint (str): SHA256:… of the instance's Ed25519 host key
        reason (str): why there is no command yet; empty when there is one
    """

    command: str
    host: str
    port: int | None
    username: str
    host_key_fingerprint: str
    reason: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        command = self.command

        host = self.host

        port: int | None
        port = self.port

        username = self.username

        host_key_fingerprint = self.host_key_fingerprint

        reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "command": command,
                "host": host,
                "port": port,
                "username": username,
                "host_key_fingerprint": host_key_fingerprint,
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        command = d.pop("command")

        host = d.pop("host")

        def _parse_port(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        port = _parse_port(d.pop("port"))

        username = d.pop("username")

        host_key_fingerprint = d.pop("host_key_fingerprint")

        reason = d.pop("reason")

        ssh_access = cls(
            command=command,
            host=host,
            port=port,
            username=username,
            host_key_fingerprint=host_key_fingerprint,
            reason=reason,
        )

        ssh_access.additional_properties = d
        return ssh_access

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
