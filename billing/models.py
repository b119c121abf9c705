"""Double-entry ledger (accounts, transactions, entries), wallets and credit grants.

Invariants:
- every ``LedgerTransaction``'s entries sum to zero (micro-CNY);
- a transaction's ``idempotency_key`` is unique, so a retried posting writes nothing new;
- ``LedgerAccount.balance_micros`` of a wallet or grant account equals the sum of its entries; it is
  updated only by ``billing.services.ledger_post`` under a row lock taken in primary-key order;
- rows are never updated (except the cached balance) nor deleted: corrections are new transactions. (Migration
  ``0012_memo_codes`` once filled the then-new ``memo_code`` / ``memo_params`` of older transactions from their
  memo text; no amount, key or text changed.)
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from billing.choices import (
    AccountKind,
    GrantKind,
    PriceTier,
    RentalMode,
    StripeEventStatus,
    TopUpStatus,
    TransactionKind,
)
from billing.memos import memo_display


class LedgerAccount(models.Model):
    """One account of the ledger. ``balance_micros`` is a cache, kept only when ``track_balance``.

    System accounts do not track a cached balance (their balance is summed on read), so that postings
    from many organizations never contend on one hot row.
    """

    code = models.CharField(max_length=80, unique=True)
    kind = models.CharField(max_length=20, choices=AccountKind.choices)
    organization = models.ForeignKey(
        "portal.Organization", null=True, blank=True, on_delete=models.PROTECT, related_name="ledger_accounts"
    )
    name = models.CharField(max_length=120)
    track_balance = models.BooleanField(default=True)
    allow_negative = models.BooleanField(default=False)
    balance_micros = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.code


class LedgerTransaction(models.Model):
    """A balanced set of entries posted atomically, identified by its idempotency key."""

    idempotency_key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=TransactionKind.choices)
    organization = models.ForeignKey(
        "portal.Organization", null=True, blank=True, on_delete=models.PROTECT, related_name="ledger_transactions"
    )
    memo = models.CharField(max_length=300, blank=True)  # English, as posted (API, CSV, admin)
    # the memo as a code of billing.memos.MEMOS and its parameters ("" / {} for a memo typed by a person)
    memo_code = models.CharField(max_length=64, blank=True)
    memo_params = models.JSONField(default=dict, blank=True)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the request; a reused key must match")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.idempotency_key}"

    @property
    def memo_display(self) -> str:
        """The memo in the reader's language (``billing.memos``), or as stored when it has no code."""
        return memo_display(code=self.memo_code, params=self.memo_params, text=self.memo)


class LedgerEntry(models.Model):
    """One signed amount on one account; positive adds to the account's balance."""

    transaction = models.ForeignKey(LedgerTransaction, on_delete=models.PROTECT, related_name="entries")
    account = models.ForeignKey(LedgerAccount, on_delete=models.PROTECT, related_name="entries")
    amount_micros = models.BigIntegerField()

    class Meta:
        ordering = ["id"]
        constraints = [models.CheckConstraint(condition=~models.Q(amount_micros=0), name="entry_nonzero")]
        indexes = [models.Index(fields=["account", "-id"])]

    def __str__(self) -> str:
        return f"{self.account_id}: {self.amount_micros}"


class Wallet(models.Model):
    """An organization's prepaid CNY wallet: the paid account plus its credit grants.

    The wallet row is the lock taken before any spend, so concurrent spends serialize per organization.
    """

    organization = models.OneToOneField("portal.Organization", on_delete=models.PROTECT, related_name="wallet")
    paid_account = models.OneToOneField(LedgerAccount, on_delete=models.PROTECT, related_name="wallet")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"wallet of {self.organization}"


class CreditGrant(models.Model):
    """Credit given, not paid (trial, promotion, staff): spent before paid balance, earliest expiry first.

    Its remaining amount is the balance of its own ledger account. At ``expires_at`` it stops counting;
    the expiry task then posts the remainder to ``system:expired-credit`` and sets ``expired_at``.
    """

    wallet = models.ForeignKey(Wallet, on_delete=models.PROTECT, related_name="grants")
    account = models.OneToOneField(LedgerAccount, on_delete=models.PROTECT, related_name="grant")
    kind = models.CharField(max_length=20, choices=GrantKind.choices)
    amount_micros = models.BigIntegerField()
    granted_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["expires_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} grant {self.pk} of {self.wallet.organization}"


class GpuPrice(models.Model):
    """One row of the price book: the price per GPU-hour of a GPU type in a rental mode, in micro-CNY,
    in force from ``effective_from`` until the next row for the same (type, mode).

    Rows are never edited once in force; a price change is a new row, so past minutes keep their price.
    """

    gpu_type = models.CharField(max_length=40, help_text="GPU type code, e.g. A100-80G-SXM")
    mode = models.CharField(max_length=20, choices=RentalMode.choices, default=RentalMode.CONTAINER)
    price_per_gpu_hour_micros = models.BigIntegerField()
    effective_from = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["gpu_type", "mode", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["gpu_type", "mode", "effective_from"], name="uniq_price_row"),
            models.CheckConstraint(condition=models.Q(price_per_gpu_hour_micros__gte=0), name="price_nonneg"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_type} {self.mode} from {self.effective_from:%Y-%m-%d %H:%M}"


class TierDiscount(models.Model):
    """A row of the price book's tier discounts: ``discount_bps`` basis points (1/100 %) off every GPU price
    for capacity sold in ``tier``, in force from ``effective_from`` until the next row of the same tier.

    Append-only like ``GpuPrice``: a change is a new row, so minutes already charged keep their price. No row
    (or 0 bps) = no discount. The discounted price per GPU-hour is rounded once, half up, to a micro-CNY
    (``billing.pricing.discounted_price_micros``); the one charging rule then applies to it unchanged.
    """

    tier = models.CharField(max_length=20, choices=PriceTier.choices)
    discount_bps = models.PositiveIntegerField(help_text="basis points off the GPU price: 4000 = 40 % off")
    effective_from = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["tier", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["tier", "effective_from"], name="uniq_tier_discount_row"),
            models.CheckConstraint(condition=models.Q(discount_bps__lte=10_000), name="tier_discount_at_most_100pct"),
        ]

    def __str__(self) -> str:
        return f"{self.tier} −{self.discount_bps / 100:g} % from {self.effective_from:%Y-%m-%d %H:%M}"


class TopUp(models.Model):
    """A wallet top-up paid through Stripe Checkout.

    Its ``idempotency_key`` (``topup:<stripe_key_uuid>``, a random UUID stored with the row before Stripe is
    called) is sent as Stripe's ``Idempotency-Key``: unique across databases, so a restored or copied database
    sharing the Stripe account never collides. The wallet is credited only by a verified
    ``checkout.session.completed`` webhook whose session id equals ``stripe_session_id`` (organization and
    amount checked too), with the ledger key ``topup:<id>``, so each payment credits exactly once;
    ``stripe_payment_intent`` is set only on that verified path and is how refunds and disputes find the
    top-up. Refunds and disputes debit the paid balance (``refunded_micros``); what the paid balance could not
    cover is recorded in ``unrecovered_micros`` for staff.

    ``request_key`` / ``request_sha256``: the API's ``Idempotency-Key`` (unique per organization) and the hash
    of the request body it came with, so a retried request answers with this top-up.
    """

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="top_ups")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    amount_micros = models.BigIntegerField()
    status = models.CharField(max_length=20, choices=TopUpStatus.choices, default=TopUpStatus.CREATED)
    idempotency_key = models.CharField(max_length=80, unique=True, null=True)
    stripe_key_uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    request_key = models.CharField(max_length=200, blank=True, default="")
    request_sha256 = models.CharField(max_length=64, blank=True, default="")
    stripe_session_id = models.CharField(max_length=255, unique=True, null=True, blank=True)
    stripe_payment_intent = models.CharField(max_length=255, unique=True, null=True, blank=True)
    checkout_url = models.URLField(max_length=1000, blank=True)
    refunded_micros = models.BigIntegerField(default=0)
    unrecovered_micros = models.BigIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "request_key"],
                condition=~models.Q(request_key=""),
                name="uniq_topup_request_key",
            )
        ]

    def __str__(self) -> str:
        return f"top-up {self.pk} of {self.organization}"


class StripePayment(models.Model):
    """One row per Stripe payment intent: the lock every event of that payment takes first.

    Completion, async success / failure, refunds and disputes of one payment all run ``INSERT … ON CONFLICT
    DO NOTHING`` then ``SELECT … FOR UPDATE`` on this row inside their transaction, so they serialize and any
    interleaving gives the same ledger (``billing.payments``).
    """

    payment_intent = models.CharField(max_length=255, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.payment_intent


class StripeEvent(models.Model):
    """Every Stripe webhook event received, once per event id, with its handling status and error."""

    event_id = models.CharField(max_length=255, unique=True)
    type = models.CharField(max_length=100)
    livemode = models.BooleanField(default=False)
    payload = models.JSONField()
    status = models.CharField(max_length=20, choices=StripeEventStatus.choices, default=StripeEventStatus.RECEIVED)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(default=timezone.now)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"


class PaymentReversal(models.Model):
    """A refund or dispute of a Stripe payment, applied to the wallet at most once per amount.

    ``reference`` is ``refund:<charge id>`` (``target_micros`` = the cumulative amount refunded, as Stripe
    reports it) or ``dispute:<dispute id>``. ``applied_micros`` is how much of the target has been debited
    or recorded as unrecoverable; a reversal that arrives before its payment's completion waits with
    ``applied_micros = 0`` and is applied right after the credit (or by the periodic sweep).
    ``debited_micros`` is the part of ``applied_micros`` actually taken from the paid balance (the rest was
    unrecoverable). A dispute closed as won (``outcome = "won"``) has its target set to 0 for good: what was
    debited is credited back once; a lost one stays debited.
    """

    payment_intent = models.CharField(max_length=255, db_index=True)
    reference = models.CharField(max_length=255, unique=True)
    target_micros = models.BigIntegerField()
    applied_micros = models.BigIntegerField(default=0)
    debited_micros = models.BigIntegerField(default=0)
    outcome = models.CharField(max_length=10, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.reference


class UsageRecord(models.Model):
    """One charged instance-minute: minute ``minute_index`` (0-based) of run segment ``segment_id``, which
    started at ``minute`` (= the segment's start + ``minute_index`` minutes; per *started* minute of use, so
    a segment of 4 min 24 s has minutes 0…4). Unique per (segment, minute index): a second tick charges
    nothing.

    ``price_minute_index`` is k when this is the k-th minute of the instance charged at
    ``price_per_gpu_hour_micros`` in a row, so that ``amount_micros`` is ``cumulative(k) - cumulative(k-1)``
    (see ``billing.pricing``). ``amount_micros`` is the full price of the minute; the ledger transaction may
    have covered less (a shortfall, shown on the statement). ``instance_id`` and ``segment_id`` refer to
    ``instances.Instance`` / ``InstanceRunSegment`` by value, so billing keeps no foreign key into the
    instances app. Rows written before per-started-minute billing have no segment.
    """

    instance_id = models.BigIntegerField()
    segment_id = models.BigIntegerField(null=True)
    minute_index = models.PositiveIntegerField(null=True)
    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="usage_records")
    minute = models.DateTimeField()
    gpu_type = models.CharField(max_length=40)
    mode = models.CharField(max_length=20, choices=RentalMode.choices)
    gpu_count = models.PositiveIntegerField()
    price_per_gpu_hour_micros = models.BigIntegerField()
    price_minute_index = models.PositiveIntegerField()
    amount_micros = models.BigIntegerField()
    transaction = models.ForeignKey(LedgerTransaction, null=True, on_delete=models.PROTECT, related_name="usage")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["segment_id", "minute_index"], name="uniq_usage_segment_minute")]
        indexes = [models.Index(fields=["organization", "minute"])]

    def __str__(self) -> str:
        return f"instance {self.instance_id} @ {self.minute:%Y-%m-%d %H:%M:%S}"


class MeteringCursor(models.Model):
    """Per instance: the segment and number of its minutes charged, the last minute's start and the run at
    one price, so a tick only looks forward.

    Read after the tick has locked the organization's wallet and updated in the same transaction as the
    usage records it summarizes; the unique constraint on ``UsageRecord`` stays the guarantee against
    double charging. ``segment_id`` is null for cursors written by clock-minute metering (before per
    started minute): their ``last_minute`` is then the start of the last charged clock minute.
    """

    instance_id = models.BigIntegerField(primary_key=True)
    segment_id = models.BigIntegerField(null=True)
    segment_minutes = models.PositiveIntegerField(default=0)
    last_minute = models.DateTimeField()
    price_per_gpu_hour_micros = models.BigIntegerField()
    price_minute_index = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"instance {self.instance_id} charged to {self.last_minute:%Y-%m-%d %H:%M}"


class UsageWriteOff(models.Model):
    """Minutes of a run segment older than the metering lookback when a tick first saw them (workers were
    down longer than ``METERING_LOOKBACK_HOURS``): not charged, audited, and shown on the statement of the
    month of ``first_minute``. ``amount_micros`` is what they would have cost. One row per (segment, first
    minute index)."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="+")
    instance_id = models.BigIntegerField()
    segment_id = models.BigIntegerField()
    first_minute_index = models.PositiveIntegerField()
    first_minute = models.DateTimeField()
    minutes = models.PositiveIntegerField()
    amount_micros = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["segment_id", "first_minute_index"], name="uniq_write_off")]
        indexes = [models.Index(fields=["organization", "first_minute"])]

    def __str__(self) -> str:
        return f"{self.minutes} min of instance {self.instance_id} written off"


class MeteringWatermark(models.Model):
    """Per metering shard: the time up to which a tick has looked, so the next one (after any outage) also
    sees segments that ended before its lookback window and writes their minutes off instead of losing them."""

    shard = models.CharField(max_length=20, primary_key=True)
    scanned_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.shard}: {self.scanned_until}"


class LowBalanceNotice(models.Model):
    """An open low-balance notice of an organization at one threshold; closed when the balance recovers."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.CASCADE, related_name="low_balance")
    threshold_micros = models.BigIntegerField()
    balance_micros = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "threshold_micros"],
                condition=models.Q(cleared_at__isnull=True),
                name="one_open_notice",
            )
        ]

    def __str__(self) -> str:
        return f"{self.organization} below {self.threshold_micros} micros"


class StoragePrice(models.Model):
    """A price-book row for persistent volumes: micro-CNY per GB-hour, in force from ``effective_from`` until
    the next row. Never edited once in force (a change is a new row). With no row in force the setting
    ``VOLUME_PRICE_PER_GB_HOUR`` (CNY) applies (``billing.pricing.PriceBook.storage_at``)."""

    price_per_gb_hour_micros = models.BigIntegerField()
    effective_from = models.DateTimeField(default=timezone.now, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-effective_from"]
        constraints = [
            models.CheckConstraint(condition=models.Q(price_per_gb_hour_micros__gte=0), name="storage_price_nonneg")
        ]

    def __str__(self) -> str:
        return f"storage from {self.effective_from:%Y-%m-%d %H:%M}"


class VolumeUsage(models.Model):
    """One charged volume-hour: hour ``hour_index`` (0-based) of volume ``volume_id``, which began at ``hour``
    (= the volume's creation + ``hour_index`` hours; per *started* hour, so a volume kept 2 h 10 min pays
    3 hours). Unique per (volume, hour index): a second tick charges nothing. ``amount_micros`` is the full
    price of the hour (``billing.volume_metering``); ``shortfall_micros`` the part the balance could not
    cover. ``volume_id`` refers to ``instances.Volume`` by value (billing keeps no key into instances)."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="volume_usage")
    volume_id = models.BigIntegerField()
    volume_name = models.CharField(max_length=40)
    hour_index = models.PositiveIntegerField()
    hour = models.DateTimeField()
    size_gb = models.PositiveIntegerField()
    price_per_gb_hour_micros = models.BigIntegerField()
    amount_micros = models.BigIntegerField()
    shortfall_micros = models.BigIntegerField(default=0)
    transaction = models.ForeignKey(LedgerTransaction, null=True, on_delete=models.PROTECT, related_name="volume_usage")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["volume_id", "hour_index"], name="uniq_volume_hour")]
        indexes = [models.Index(fields=["organization", "hour"])]

    def __str__(self) -> str:
        return f"volume {self.volume_id} @ {self.hour:%Y-%m-%d %H:%M}"
