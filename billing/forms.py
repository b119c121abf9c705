"""Back-office forms of the billing app."""

from decimal import Decimal

from django import forms
from django.utils.translation import gettext_lazy as _


class AdjustmentForm(forms.Form):
    """A staff correction of an organization's paid balance; the reason is recorded on the transaction."""

    amount = forms.DecimalField(label=_("Amount (CNY, negative to debit)"), max_digits=14, decimal_places=6)
    reason = forms.CharField(label=_("Reason"), max_length=300, widget=forms.Textarea(attrs={"rows": 3}))

    def clean_amount(self) -> Decimal:
        amount: Decimal = self.cleaned_data["amount"]
        if amount == 0:
            raise forms.ValidationError(_("An adjustment cannot be zero."))
        return amount


class TcoForm(forms.Form):
    """Inputs of the rent-vs-buy calculator; defaults and their sources are in ``billing.tco``."""

    gpu_type = forms.ChoiceField(label=_("GPU type"))
    gpus = forms.IntegerField(label=_("GPUs"), min_value=1, max_value=4096, initial=8)
    months = forms.IntegerField(label=_("Months"), min_value=1, max_value=120, initial=36)
    utilization = forms.DecimalField(
        label=_("Utilization (%)"), min_value=1, max_value=100, max_digits=5, decimal_places=2, initial=60
    )
    card_price = forms.DecimalField(
        label=_("Card price (CNY per GPU)"),
        min_value=0,
        max_value=10_000_000,
        max_digits=14,
        decimal_places=2,
        required=False,
    )
    server_overhead = forms.DecimalField(
        label=_("Server overhead (%)"), min_value=0, max_value=500, max_digits=6, decimal_places=2, initial=35
    )
    gpu_power_kw = forms.DecimalField(label=_("Power per GPU (kW)"), min_value=0, max_value=5, required=False)
    pue = forms.DecimalField(label=_("PUE (cooling)"), min_value=1, max_value=3, initial=Decimal("1.5"))
    power_price = forms.DecimalField(
        label=_("Power price (CNY/kWh)"),
        min_value=0,
        max_value=100,
        max_digits=8,
        decimal_places=4,
        initial=Decimal("0.80"),
    )
    staff_monthly = forms.DecimalField(
        label=_("Staff (CNY/month)"), min_value=0, max_value=100_000_000, max_digits=12, decimal_places=2, initial=20000
    )

    def __init__(self, *args: object, gpu_types: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["gpu_type"].choices = [(t, t) for t in gpu_types]  # type: ignore[attr-defined]
