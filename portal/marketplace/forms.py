"""Console forms of the marketplace."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from portal.api.parsers import json_problem
from portal.lib import strictjson
from portal.marketplace.choices import AppCategory, AppVisibility

DEFAULT_INPUT = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "maxLength": 20000}}}
DEFAULT_OUTPUT = {"type": "object", "required": ["output"]}


class JsonField(forms.CharField):
    """A textarea that must hold a JSON object."""

    widget = forms.Textarea(attrs={"rows": 5, "class": "mono"})

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text:
            return {}
        try:
            data = strictjson.loads(text)
        except RecursionError as exc:
            raise forms.ValidationError(_("The document is nested too deeply.")) from exc
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                _("Not valid JSON (line %(line)d, column %(column)d).") % {"line": exc.lineno, "column": exc.colno}
            ) from exc
        except ValueError as exc:  # NaN, Infinity
            raise forms.ValidationError(_("Not valid JSON: NaN and Infinity are not JSON numbers.")) from exc
        problem = json_problem(data)
        if problem:
            raise forms.ValidationError(problem)
        if not isinstance(data, dict):
            raise forms.ValidationError(_("Enter a JSON object."))
        return data

    def validate(self, value: Any) -> None:
        """``{}`` is a valid object; only a missing value is "required"."""
        if value is None and self.required:
            raise forms.ValidationError(self.error_messages["required"], code="required")

    def clean(self, value: Any) -> Any:
        if self.required and (value is None or not str(value).strip()):
            raise forms.ValidationError(self.error_messages["required"], code="required")
        return super().clean(value)

    def prepare_value(self, value: Any) -> Any:
        return json.dumps(value, ensure_ascii=False, indent=2) if isinstance(value, dict) else value


class AppForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100)
    category = forms.ChoiceField(label=_("Category"), choices=AppCategory.choices)
    description = forms.CharField(label=_("Description"), widget=forms.Textarea(attrs={"rows": 3}), required=False)
    price_per_call = forms.DecimalField(
        label=_("Price per call (CNY)"), min_value=Decimal(0), decimal_places=6, max_digits=12, initial=Decimal("0.05")
    )
    visibility = forms.ChoiceField(label=_("Visibility"), choices=AppVisibility.choices)
    input_schema = JsonField(label=_("Input JSON Schema"), initial=DEFAULT_INPUT)
    output_schema = JsonField(label=_("Output JSON Schema"), initial=DEFAULT_OUTPUT)
    endpoint_url = forms.URLField(
        label=_("HTTPS endpoint (leave empty for the built-in echo)"), required=False, assume_scheme="https"
    )


class TryForm(forms.Form):
    payload = JsonField(label=_("Request (JSON)"))


class PublishForm(forms.Form):
    """Publish a training checkpoint as an app: the model answers ``{"text", "max_new_tokens"}`` requests."""

    name = forms.CharField(label=_("Name"), max_length=100)
    category = forms.ChoiceField(label=_("Category"), choices=AppCategory.choices)
    description = forms.CharField(label=_("Description"), widget=forms.Textarea(attrs={"rows": 3}), required=False)
    price_per_call = forms.DecimalField(
        label=_("Price per call (CNY)"), min_value=Decimal(0), decimal_places=6, max_digits=12, initial=Decimal(0)
    )
    price_per_1k_tokens = forms.DecimalField(
        label=_("Price per 1,000 generated tokens (CNY)"),
        min_value=Decimal(0),
        decimal_places=6,
        max_digits=12,
        initial=Decimal(0),
        required=False,
        help_text=_("Charged on top of the price per call, for the tokens the model generates."),
    )
    price_per_1k_prompt_tokens = forms.DecimalField(
        label=_("Price per 1,000 prompt tokens (CNY)"),
        min_value=Decimal(0),
        decimal_places=6,
        max_digits=12,
        initial=Decimal(0),
        required=False,
        help_text=_("Charged on top of the price per call, for the prompt tokens of OpenAI-compatible calls."),
    )
    visibility = forms.ChoiceField(label=_("Visibility"), choices=AppVisibility.choices)

    def clean_price_per_1k_tokens(self) -> Decimal:
        """Empty means no price per token."""
        return self.cleaned_data.get("price_per_1k_tokens") or Decimal(0)

    def clean_price_per_1k_prompt_tokens(self) -> Decimal:
        """Empty means no price per prompt token."""
        return self.cleaned_data.get("price_per_1k_prompt_tokens") or Decimal(0)


class CallCapForm(forms.Form):
    """The organization's monthly cap on app calls; empty = the platform default."""

    cap = forms.DecimalField(
        label=_("Monthly cap on app calls (CNY)"),
        min_value=Decimal("0.01"),
        decimal_places=2,
        max_digits=12,
        required=False,
        help_text=_("Calls are refused once this month's calls reach it. Empty: the platform default."),
    )
