"""Console page "SSH keys" (account menu): add a key, list the active ones with their fingerprints, revoke
with confirmation. Keys are the requesting user's own; another user's key is a 404."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from django.views.decorators.http import require_POST

from portal.lib.htmx import is_partial
from portal.lib.http import AuthedHttpRequest
from portal.sshkeys import SshKeyError, ssh_key_add, ssh_key_revoke, ssh_keys_for_user


class SshKeyForm(forms.Form):
    """Name and public key line of a new SSH key."""

    name = forms.CharField(label=_lazy("Name"), max_length=100, required=False)
    public_key = forms.CharField(
        label=_lazy("Public key"),
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "ssh-ed25519 AAAA… you@laptop", "spellcheck": "false"}),
    )


@login_required
def ssh_keys(request: AuthedHttpRequest) -> HttpResponse:
    user = request.user
    form = SshKeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            key = ssh_key_add(user=user, name=form.cleaned_data["name"], public_key=form.cleaned_data["public_key"])
        except SshKeyError as exc:
            form.add_error("public_key", str(exc))
        else:
            messages.success(request, _("SSH key %(fp)s added.") % {"fp": key.fingerprint})
            return HttpResponseRedirect(reverse("ssh_keys"))
    if form.errors and "PRIVATE KEY" in form.data.get("public_key", ""):  # never echo a private key into the page
        form.data = {**form.data, "public_key": ""}
    context = {"form": form, "keys": ssh_keys_for_user(user)}
    return render(request, "portal/ssh_keys.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def ssh_key_revoke_view(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    key = ssh_keys_for_user(request.user).filter(pk=pk).first()
    if key is None:  # another user's key is indistinguishable from a missing one
        raise Http404("key not found")
    key = ssh_key_revoke(key=key, acting_user=request.user)
    if is_partial(request):
        return HttpResponse("")  # the row disappears
    messages.success(request, _("SSH key revoked."))
    return HttpResponseRedirect(reverse("ssh_keys"))
