"""Console forms of the datasets app."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from datasets.choices import Domain, PlaceholderStyle, UploadFormat


class CatalogFilterForm(forms.Form):
    """Search and filters of the catalog page (all optional, GET)."""

    q = forms.CharField(label=_("Search"), required=False, max_length=100)
    domain = forms.ChoiceField(label=_("Domain"), required=False, choices=[("", _("All domains")), *Domain.choices])
    language = forms.ChoiceField(
        label=_("Language"),
        required=False,
        choices=[("", _("All languages")), ("zh", _("Chinese")), ("en", _("English"))],
    )
    commercial_use = forms.BooleanField(label=_("Commercial use allowed"), required=False)
    derivative_models = forms.BooleanField(label=_("Derivative models allowed"), required=False)
    free = forms.BooleanField(label=_("Free"), required=False)


class UploadForm(forms.Form):
    """A corpus upload: the file is streamed to disk by Django's upload handlers before ``clean`` runs."""

    file = forms.FileField(label=_("File"))
    name = forms.CharField(label=_("Dataset name"), max_length=200)
    format = forms.ChoiceField(label=_("Format"), choices=UploadFormat.choices)
    text_column = forms.CharField(
        label=_("Text column (CSV)"),
        max_length=100,
        required=False,
        help_text=_("The name of the CSV column that holds the text."),
    )
    domain = forms.ChoiceField(label=_("Domain"), choices=Domain.choices, initial=Domain.OTHER)
    keep_original = forms.BooleanField(
        label=_("Keep the original file"),
        required=False,
        help_text=_("Otherwise it is deleted once the de-identified shards are ready."),
    )

    tokenizer_from = forms.TypedChoiceField(
        label=_("Tokenizer"),
        required=False,
        coerce=int,
        empty_value=None,
        choices=[("", _("Train a new tokenizer on this upload"))],
        help_text=_("Or re-use the tokenizer of a dataset version you can mount (same token ids)."),
    )

    def __init__(self, *args: Any, tokenizer_versions: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["tokenizer_from"]
        field.choices = [*field.choices, *((v.pk, f"{v.dataset.name} v{v.number}") for v in tokenizer_versions)]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("format") == UploadFormat.CSV and not (data.get("text_column") or "").strip():
            self.add_error("text_column", _("A CSV upload needs the name of the column that holds the text."))
        return data


class AgreementForm(forms.Form):
    """The hash of the license text shown in the modal (sent back so the agreement records what was shown)."""

    license_version = forms.IntegerField(widget=forms.HiddenInput)
    text_sha256 = forms.RegexField(regex=r"^[0-9a-f]{64}$", widget=forms.HiddenInput)


class MountForm(forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput)
    consumer = forms.CharField(label=_("Attach to"), max_length=200)


class DeidPolicyForm(forms.Form):
    """The organization's de-identification settings (``datasets.policy.deid_policy_update``)."""

    placeholder_style = forms.ChoiceField(label=_("Placeholder style"), choices=PlaceholderStyle.choices)
    allow_list = forms.CharField(
        label=_("Allow-list"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text=_("Values never replaced, one per line (e.g. your company's hotline or support address)."),
    )
