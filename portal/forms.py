"""Console forms of the portal app."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.forms import AuthenticationForm
from django.utils.translation import gettext_lazy as _

from portal.choices import Role, TokenScope
from portal.models import Organization, User


class SignupForm(forms.Form):
    """E-mail, name and password (twice); the address must be new, the password pass the validators."""

    email = forms.EmailField(label=_("E-mail address"), max_length=254)
    name = forms.CharField(label=_("Your name"), max_length=150, required=False)
    password1 = forms.CharField(label=_("Password"), widget=forms.PasswordInput, strip=False)
    password2 = forms.CharField(label=_("Password again"), widget=forms.PasswordInput, strip=False)

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip().lower()
        if User.objects.filter(email=email).exists():
            raise forms.ValidationError(_("An account with this e-mail address already exists."))
        return email

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        p1, p2 = data.get("password1"), data.get("password2")
        if p1 and p2 and p1 != p2:
            self.add_error("password2", _("The two passwords differ."))
        elif p1:
            try:
                password_validation.validate_password(p1, User(email=data.get("email", ""), name=data.get("name", "")))
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


class ApiTokenForm(forms.Form):
    """Name, organization and scope of a new API token."""

    name = forms.CharField(label=_("Name"), max_length=100)
    organization = forms.ModelChoiceField(
        label=_("Organization"), queryset=Organization.objects.none(), to_field_name="slug"
    )
    scope = forms.ChoiceField(label=_("Scope"), choices=TokenScope.choices, initial=TokenScope.READ)

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["organization"].queryset = (  # type: ignore[attr-defined]
            Organization.objects.filter(memberships__user=user).order_by("-personal", "name")
        )
        self.fields["organization"].empty_label = None  # type: ignore[attr-defined]  # preselect the first one


class MemberForm(forms.Form):
    """Add an existing account to a team organization."""

    email = forms.EmailField(label=_("E-mail address"))
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER)


class OrganizationForm(forms.Form):
    name = forms.CharField(label=_("Team name"), max_length=150)


class LoginForm(AuthenticationForm):
    """Django's login form with the e-mail address lower-cased first: addresses are stored lower-case,
    and django-axes then counts failures per address whatever its case."""

    def clean_username(self) -> str:
        return str(self.cleaned_data.get("username", "")).strip().lower()
