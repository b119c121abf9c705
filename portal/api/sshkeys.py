"""``/api/v1/ssh-keys``: the requesting user's SSH public keys (list, show, add, revoke). Keys belong to the
user, not to an organization; another user's key is a 404. ``DELETE`` revokes (the key stays in the audit
trail) and answers the revoked key."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.errors import ApiError
from portal.models import ApiToken
from portal.sshkeys import SshKey, SshKeyError, ssh_key_add, ssh_key_revoke, ssh_keys_for_user


class SshKeySerializer(serializers.ModelSerializer[SshKey]):
    class Meta:
        model = SshKey
        fields = ["id", "name", "algorithm", "bits", "fingerprint", "public_key", "created_at", "revoked_at"]


class SshKeyCreateSerializer(serializers.Serializer[dict[str, str]]):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    public_key = serializers.CharField(max_length=16_000, trim_whitespace=True)


class SshKeyViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):  # type: ignore[type-arg]
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token."""

    serializer_class = SshKeySerializer
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return SshKey.objects.none()
        return ssh_keys_for_user(self.request.user)

    def get_serializer_class(self):  # type: ignore[no-untyped-def]
        return SshKeyCreateSerializer if self.action == "create" else SshKeySerializer

    def create(self, request: Request) -> Response:
        if isinstance(request.auth, ApiToken):
            raise ApiError(
                "session_required",
                _("SSH keys are added in the console or with a signed-in session, not with an API token."),
                403,
            )
        data = SshKeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            key = ssh_key_add(
                user=request.user,  # type: ignore[arg-type]
                name=data.validated_data["name"],
                public_key=data.validated_data["public_key"],
            )
        except SshKeyError as exc:
            raise ApiError("invalid_ssh_key", str(exc), 400) from exc
        return Response(SshKeySerializer(key).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        key = ssh_key_revoke(key=self.get_object(), acting_user=request.user)  # type: ignore[arg-type]
        return Response(SshKeySerializer(key).data)
