"""The console's page of a model app shows how to call it with the OpenAI API — copy-paste snippets for the
``openai`` package and ``curl`` with the base URL and the model name — and its per-token prices before the first
call, in English and Chinese; other apps show no snippet, and outsiders get 404."""

from __future__ import annotations

import html
from typing import Any

import pytest

from portal.marketplace import services
from portal.marketplace.choices import AppState, AppVisibility, ServingKind, VersionStatus
from portal.marketplace.models import AppVersion
from portal.marketplace.publishing import TEXT_INPUT_SCHEMA, TEXT_OUTPUT_SCHEMA

pytestmark = pytest.mark.django_db


def _app(alice: Any, org: Any, *, name: str, kind: str, visibility: str = AppVisibility.PUBLIC) -> Any:
    app = services.app_create(
        publisher=org, user=alice, name=name, category="legal", description="", input_schema=TEXT_INPUT_SCHEMA,
        output_schema=TEXT_OUTPUT_SCHEMA, price_per_call_micros=1_000, price_per_1k_tokens_micros=7_777,
        price_per_1k_prompt_tokens_micros=2_345, visibility=visibility,
    )  # fmt: skip
    if kind == ServingKind.CHECKPOINT:
        AppVersion.objects.create(app=app, number=1, kind=kind, artifact_path="/nowhere", status=VersionStatus.READY,
                                  active=True, deployment={"stage": "serving"})  # fmt: skip
    else:
        services.app_version_add(app=app, user=alice, kind=kind)
    if visibility == AppVisibility.PUBLIC:
        services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
        return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=alice)


def _page(client: Any, user: Any, org: Any, app: Any, language: str = "en") -> Any:
    client.force_login(user)
    return client.get(f"/o/{org.slug}/apps/{app.slug}/", HTTP_ACCEPT_LANGUAGE=language)


def test_a_model_apps_page_shows_openai_and_curl_snippets_and_its_token_prices(
    client: Any, alice: Any, alice_org: Any, charlie: Any
) -> None:
    model = _app(alice, alice_org, name="Legal drafting", kind=ServingKind.CHECKPOINT)
    page = _page(client, charlie, charlie.organizations.get(), model)
    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    base = "http://testserver/api/v1/openai/v1"
    assert f'<code data-testid="openai-base-url">{base}</code>' in text
    assert f'<code data-testid="openai-model">{model.slug}</code>' in text
    assert f'client = OpenAI(base_url="{base}", api_key="gpp_...")' in text
    assert f'    model="{model.slug}",' in text and "stream=True," in text
    assert f"curl {base}/chat/completions \\\n" in text
    assert (
        f'-d \'{{"model": "{model.slug}", "messages": [{{"role": "user", "content": "第一条"}}], "max_tokens": 64}}\''
        in text
    )
    assert (
        "Prices: 0.001000 CNY per call + 0.002345 CNY per 1,000 prompt tokens + 0.007777 CNY per 1,000 completion"
        " tokens." in text
    )
    assert "+ 0.002345 CNY</strong> per 1,000 prompt tokens." in text

    zh = html.unescape(_page(client, charlie, charlie.organizations.get(), model, "zh-hans").content.decode())
    assert "用 OpenAI API 调用" in zh and f'模型 <code data-testid="openai-model">{model.slug}</code>' in zh
    assert "价格：每次调用 0.001000 元 + 每 1,000 个提示词元 0.002345 元 + 每 1,000 个生成词元 0.007777 元。" in zh
    assert "Call it with the OpenAI API" not in zh


def test_other_apps_show_no_snippet_and_an_outsider_gets_404_for_a_private_model(
    client: Any, alice: Any, alice_org: Any, charlie: Any
) -> None:
    echo = _app(alice, alice_org, name="Echo", kind=ServingKind.ECHO)
    private = _app(alice, alice_org, name="In house", kind=ServingKind.CHECKPOINT, visibility=AppVisibility.PRIVATE)
    charlie_org = charlie.organizations.get()
    page = _page(client, charlie, charlie_org, echo)
    assert page.status_code == 200 and 'data-testid="openai-snippets"' not in page.content.decode()
    assert _page(client, charlie, charlie_org, private).status_code == 404
    assert 'data-testid="openai-snippets"' in _page(client, alice, alice_org, private).content.decode()
