"""Enumerations of the billing app."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class AccountKind(models.TextChoices):
    """What a ledger account holds. Wallet accounts carry a cached balance and may never go negative."""

    WALLET_PAID = "wallet_paid", _("Paid balance")
    CREDIT_GRANT = "credit_grant", _("Credit grant")
    SYSTEM = "system", _("System")


class SystemAccount(models.TextChoices):
    """Codes of the platform's own accounts, the other side of every customer posting."""

    REVENUE = "system:revenue", _("Revenue")
    PROMOTIONS = "system:promotions", _("Promotional credit issued")
    EXPIRED_CREDIT = "system:expired-credit", _("Expired credit")
    STRIPE = "system:stripe", _("Stripe clearing")
    ADJUSTMENTS = "system:adjustments", _("Manual adjustments")


class TransactionKind(models.TextChoices):
    """Why money moved; statements group lines by kind."""

    CREDIT_GRANT = "credit_grant", _("Credit grant")
    GRANT_EXPIRY = "grant_expiry", _("Credit expiry")
    TOP_UP = "top_up", _("Top-up")
    SPEND = "spend", _("Spend")
    USAGE = "usage", _("GPU usage")
    STORAGE = "storage", _("Volume storage")
    LICENSE_FEE = "license_fee", _("Dataset license fee")
    APP_CALL = "app_call", _("App call")
    REFUND = "refund", _("Refund")
    ADJUSTMENT = "adjustment", _("Adjustment")


class GrantKind(models.TextChoices):
    TRIAL = "trial", _("Trial credit")
    PROMOTIONAL = "promotional", _("Promotional credit")
    STAFF = "staff", _("Credit from staff")


class RentalMode(models.TextChoices):
    """How GPUs are rented: a share of a node from 1 GPU, or whole 8-GPU nodes."""

    CONTAINER = "container", _("Container")
    BARE_METAL = "bare_metal", _("Bare metal")


class PriceTier(models.TextChoices):
    """How capacity is sold: on demand (never taken back), or interruptible at the price book's discount
    (``billing.TierDiscount``): the scheduler may preempt it when an on-demand request needs the capacity."""

    ON_DEMAND = "on_demand", _("On demand")
    INTERRUPTIBLE = "interruptible", _("Interruptible")


class TopUpStatus(models.TextChoices):
    """A top-up's life: created → checkout_open → paid (credited once); or failed / expired."""

    CREATED = "created", _("Created")
    CHECKOUT_OPEN = "checkout_open", _("Awaiting payment")
    PAID = "paid", _("Paid")
    FAILED = "failed", _("Failed")
    EXPIRED = "expired", _("Expired")


class StripeEventStatus(models.TextChoices):
    RECEIVED = "received", _("Received")
    PROCESSED = "processed", _("Processed")
    IGNORED = "ignored", _("Ignored")
    FAILED = "failed", _("Failed")
