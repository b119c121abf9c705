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
