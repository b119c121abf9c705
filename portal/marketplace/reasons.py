"""Why an app is in its state, and why a model server is unhealthy, as codes with parameters: the one home of
the marketplace's stored texts (the engine: ``portal.lib.coded_text``).

``App.state_reason`` keeps the English text (the API and the admin read it) and ``state_reason_code`` /
``state_reason_params`` the code, rendered in the reader's language by ``App.state_reason_display``; a reason
typed by staff in the admin is plain text and is shown as typed. Migration ``marketplace.0003_state_reason_codes``
gave the apps written before codes theirs, read back from their English text.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop

from portal.lib.coded_text import CodedText, TextCodes

APP_REASONS = TextCodes(
    {
        "published_first_version": gettext_noop("published when its first version was built"),
        "approved_by_staff": gettext_noop("approved by staff"),
        "suspended_by_staff": gettext_noop("suspended by staff"),
        # services.license_problems: one per license term the training data's lineage lacks
        "license_no_derivatives": gettext_noop("%(label)s does not allow derivative models"),
        "license_no_commercial": gettext_noop("%(label)s does not allow commercial use"),
        "license_forbids": gettext_noop("A public or paid app cannot be published: %(p)s"),
        # deployments: the health check gave up restarting a model server (its last error is shown apart)
        "restarts_failed": gettext_noop("%(n)d restarts in a row failed; last: %(error)s"),
        "restarts_failed_summary": gettext_noop("%(n)d restarts in a row failed; the last error:"),
    },
    nested={"license_forbids": ("p",)},
)


def app_reason(code: str, **params: Any) -> CodedText:
    """The reason ``code`` with ``params``; ``KeyError`` for a code missing from :data:`APP_REASONS`."""
    return APP_REASONS.coded(code, **params)


def app_reason_display(value: str, *, code: str = "", params: dict[str, Any] | None = None) -> str:
    """A reason in the active language: ``value``'s own code (a ``CodedText``) or the stored ``code`` /
    ``params``; ``value`` as it is when there is none."""
    if isinstance(value, CodedText):
        code, params = value.code, value.params
    return APP_REASONS.render(code=code, params=params, fallback=str(value))
