"""What a ledger line is for, as a code with parameters: the one home of the ledger's descriptions.

Every service that posts passes its memo as ``memo("volume_hour", name=…, size_gb=…, hour=…)`` (a
``portal.lib.coded_text.CodedText``: a ``str`` holding the English text, with its code and params); the ledger
(``billing.ledger``, and the app-call settlement in SQL, ``billing.call_sql``) stores the English text in
``LedgerTransaction.memo`` (the API, CSV and the admin read it) and the code and params in ``memo_code`` /
``memo_params``. Pages show :func:`memo_display` in the reader's language. A memo typed by a person (a staff
grant's or adjustment's reason) is plain text: it has no code and is shown as typed. Migration
``billing.0012_memo_codes`` gave the lines written before codes theirs, read back from their English text
(:meth:`TextCodes.parse`); amounts were not touched.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop

from portal.lib.coded_text import CodedText, TextCodes

MEMOS = TextCodes(
    {
        # GPU metering (billing.usage_batches): the line's instances are named from its usage records
        "gpu_usage": gettext_noop("GPU usage"),
        "gpu_usage_uncovered": gettext_noop("GPU usage (partly uncovered)"),
        # volume metering (billing.volume_metering)
        "volume_hour": gettext_noop("Volume %(name)s (%(size_gb)d GB), hour %(hour)d"),
        # marketplace and datasets
        "app_call": gettext_noop("App call: %(name)s"),
        "license_fee": gettext_noop("License fee: %(name)s"),
        # credit grants (their kinds) and their expiry
        "grant_trial": gettext_noop("Trial credit"),
        "grant_promotional": gettext_noop("Promotional credit"),
        "grant_staff": gettext_noop("Credit from staff"),
        "grant_expiry": gettext_noop("Expiry of %(name)s"),
        # top-ups and their reversals (billing.services, billing.payments)
        "top_up": gettext_noop("Top-up"),
        "stripe_top_up": gettext_noop("Stripe top-up"),
        "stripe_refund": gettext_noop("Stripe refund"),
        "stripe_dispute": gettext_noop("Stripe dispute"),
        "stripe_dispute_won": gettext_noop("Stripe dispute won: amount credited back"),
    },
    nested={"grant_expiry": ("name",)},  # the grant's kind, itself a memo ("Expiry of Trial credit")
)


def memo(code: str, **params: Any) -> CodedText:
    """The memo ``code`` with ``params``; raises ``KeyError`` for a code missing from :data:`MEMOS`."""
    return MEMOS.coded(code, **params)


def grant_memo(kind: str) -> CodedText:
    """The memo naming a credit grant's kind (``GrantKind`` value: trial, promotional, staff)."""
    return memo("grant_" + str(getattr(kind, "value", kind)))


def memo_display(*, code: str, params: dict[str, Any] | None, text: str) -> str:
    """A ledger line's description in the active language: its code rendered, else ``text`` as stored."""
    return MEMOS.render(code=code, params=params, fallback=text)


def memo_of_text(text: str) -> str:
    """A memo known only by its English text (an aggregate grouped by memo): recognised and rendered in the
    active language, else as it is."""
    found = MEMOS.parse(text or "")
    return memo_display(code=found[0], params=found[1], text=text) if found else (text or "")
