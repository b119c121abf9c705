"""Console form of outgoing webhooks; the rules themselves are checked by the services."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from portal.webhooks.choices import EventType
from portal.webhooks.services import MAX_DESCRIPTION_LENGTH, MAX_URL_LENGTH


class EndpointForm(forms.Form):
    url = forms.CharField(
        label=_("Endpoint URL"),
        max_length=MAX_URL_LENGTH,
        widget=forms.URLInput(attrs={"placeholder": "https://example.com/webhooks/gpu-portal"}),
    )
    description = forms.CharField(label=_("Description"), max_length=MAX_DESCRIPTION_LENGTH, required=False)
    event_types = forms.MultipleChoiceField(
        label=_("Events"), choices=EventType.choices, widget=forms.CheckboxSelectMultiple
    )
