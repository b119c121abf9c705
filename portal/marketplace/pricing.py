"""The listed price of an app call and the publisher's own share: the pieces of the one pricing rule of app calls
(``portal.marketplace.calls.token_price_micros``), and a settled call's cost split as the console explains it."""

from __future__ import annotations

from dataclasses import dataclass

from portal.marketplace.models import App, AppCall


def list_price_micros(app: App, *, prompt_tokens: int, completion_tokens: int) -> int:
    """The listed price of one call of ``app`` with ``prompt_tokens`` in and ``completion_tokens`` out, in
    micro-CNY: the price per call plus ``(price_per_1k_prompt_tokens_micros × prompt_tokens +
    price_per_1k_tokens_micros × completion_tokens) / 1000`` rounded up once (to the micro-CNY)."""
    per_tokens = (
        app.price_per_1k_prompt_tokens_micros * prompt_tokens + app.price_per_1k_tokens_micros * completion_tokens
    )
    return app.price_per_call_micros + -(-per_tokens // 1000)


def own_share_micros(app: App, list_micros: int) -> int:
    """The publisher's share of ``list_micros`` (``publisher_share_bps``, rounded down) — the one rule: credited
    to the publisher on another organization's call (``calls.publisher_share_micros``), and not charged on the
    publisher's call of its own app, instead of being paid and credited back to itself."""
    return list_micros * app.publisher_share_bps // 10_000


@dataclass(frozen=True)
class CallCost:
    """What one call cost its caller, in micro-CNY: ``list_micros`` (the app's listed price for the call),
    ``own_share_micros`` (the publisher's share left out because the caller is the publisher: 0 for any other
    caller) and ``charged_micros`` (= ``list_micros - own_share_micros``, what the ledger took)."""

    list_micros: int
    own_share_micros: int
    charged_micros: int

    @property
    def own_app(self) -> bool:
        """True when the publisher called its own app (its share was left out of the charge)."""
        return self.own_share_micros > 0


def call_cost(call: AppCall) -> CallCost:
    """The cost of a settled ``call`` split as :class:`CallCost`, from its app's prices and the tokens it was
    charged for. A call whose charge the current prices do not reproduce (the app's price changed since) is
    shown as charged, with no share."""
    app = call.app
    charged = call.price_micros
    if call.caller_id != app.publisher_id:
        return CallCost(charged, 0, charged)
    full = list_price_micros(app, prompt_tokens=call.prompt_tokens or 0, completion_tokens=call.billed_tokens or 0)
    share = own_share_micros(app, full)
    if full - share != charged:
        return CallCost(charged, 0, charged)
    return CallCost(full, share, charged)
