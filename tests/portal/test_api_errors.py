"""Every API error is a 4xx in the error envelope, never a 500; bad input writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from instances.limits import HYPERPARAMETER_LIMITS, LimitError, hyperparameters_validate
from portal.choices import TokenScope
from portal.services import api_token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(alice: Any, alice_org: Any) -> APIClient:
    from django.core.management import call_command

    call_command("seed_catalog", verbosity=0)
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Bearer "
        + api_token_create(user=alice, organization=alice_org, name="t", scope=TokenScope.WRITE).plaintext
    )
    return client


def _envelope(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    if code is not None:
        assert body["error"]["code"] == code, body
    return body


def _instance(alice_org: Any, alice: Any) -> Any:
    from instances.models import GpuType, Instance, TrainingJob

    inst = Instance.objects.create(
        organization=alice_org,
        created_by=alice,
        name="i",
        kind="training",
        gpu_type=GpuType.objects.get(code="cpu-local"),
        gpu_count=1,
        mode="container",
    )
    TrainingJob.objects.create(instance=inst, organization=alice_org, name="j", model_preset="tiny", engine="ddp")
    return inst


def test_format_suffixes_on_actions_are_404_not_500(api, alice, alice_org):
    inst = _instance(alice_org, alice)
    for url in (
        f"/api/v1/instances/{inst.pk}/stop.json",
        f"/api/v1/jobs/{inst.job.pk}/stop.json",
        f"/api/v1/jobs/{inst.job.pk}/restart.json",
        f"/api/v1/jobs/{inst.job.pk}/checkpoints.json",
        f"/api/v1/jobs/{inst.job.pk}/logs.json",
        f"/api/v1/instances/{inst.pk}.json",
        "/api/v1/jobs.json",
    ):
        method = api.post if url.endswith(("stop.json", "restart.json")) else api.get
        _envelope(method(url, format="json"), 404, "not_found")
    inst.refresh_from_db()
    assert inst.status == "pending"


@pytest.mark.parametrize("query", ["organization=a%00b", "cursor=%00", "status=x%00", "lines=1%00"])
def test_a_nul_in_any_query_parameter_is_a_400(api, alice, alice_org, query):
    inst = _instance(alice_org, alice)
    for url in ("/api/v1/wallet", "/api/v1/instances", f"/api/v1/jobs/{inst.job.pk}/logs", "/api/v1/apps"):
        body = _envelope(api.get(f"{url}?{query}"), 400, "invalid_parameter")
        assert "NUL" in body["error"]["message"]


def test_an_oversized_query_parameter_is_a_400(api):
    _envelope(api.get("/api/v1/instances?organization=" + "a" * 5000), 400, "invalid_parameter")


def test_a_nul_in_a_console_url_is_a_plain_400(client, alice):
    client.force_login(alice)
    assert client.get("/o/alice/wallet/?page=%00").status_code == 400


@pytest.mark.parametrize("url", ["/api/v1/instances", "/api/v1/jobs", "/api/v1/wallet/top-ups"])
def test_deeply_nested_json_is_a_400_and_creates_nothing(api, url):
    from instances.models import Instance

    body = '{"hyperparameters": ' + "[" * 100_000 + "]" * 100_000 + "}"
    result = _envelope(api.post(url, body, content_type="application/json"), 400, "parse_error")
    assert "nested deeper" in result["error"]["message"]
    assert Instance.objects.count() == 0


def test_nul_and_nan_in_a_json_body_are_400(api):
    for body in (
        '{"gpu_type": "cpu-local\\u0000", "gpu_count": 1, "command": ["x"]}',
        '{"gpu_type": "cpu-local", "gpu_count": NaN, "command": ["x"]}',
        '{"gpu_type": "cpu-local", "gpu_count": 1, "command": ["x"], "k\\u0000": 1}',
    ):
        _envelope(api.post("/api/v1/instances", body, content_type="application/json"), 400, "parse_error")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("checkpoint_every_minutes", 10**12),
        ("checkpoint_every_steps", 10**12),
        ("keep_last", 10**6),
        ("checkpoint_every_minutes", -1),
    ],
)
def test_huge_or_negative_checkpoint_intervals_are_400(api, field, value):
    from instances.models import Instance

    body = {"gpu_type": "cpu-local", "gpu_count": 1, "dataset_version_ids": [1], field: value}
    result = _envelope(api.post("/api/v1/jobs", body, format="json"), 400, "invalid")
    assert field in result["error"]["details"]
    assert Instance.objects.count() == 0


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("lr", 10.0, "between"),
        ("lr", 0, "between"),
        ("seq_len", 10**9, "between"),
        ("micro_batch", 0, "between"),
        ("max_steps", 10**12, "between"),
        ("grad_accum", 1.5, "whole number"),
        ("lr", "fast", "number"),
        ("warmup_stepz", 1, "Unknown hyperparameter"),
        ("async_save", 3, "true or false"),
        ("mixed_precision", "fp8", "must be one of"),
    ],
)
def test_hyperparameters_out_of_bounds_are_refused_in_api_form_and_service_alike(
    api, alice, alice_org, name, value, why
):
    from instances.forms import JobLaunchForm
    from instances.models import GpuType
    from instances.services import LaunchError, LaunchSpec
    from instances.services.launch import _validate_training

    body = {"gpu_type": "cpu-local", "gpu_count": 1, "dataset_version_ids": [1], "hyperparameters": {name: value}}
    result = _envelope(api.post("/api/v1/jobs", body, format="json"), 400, "invalid")
    assert why in json.dumps(result["error"]["details"])
    with pytest.raises(LimitError, match=why):
        hyperparameters_validate({name: value})
    with pytest.raises(LaunchError, match=why):
        _validate_training(
            alice_org,
            LaunchSpec(
                kind="training",
                name="j",
                gpu_type="cpu-local",
                gpu_count=1,
                model_preset="tiny",
                engine="ddp",
                hyperparameters={name: value},
                dataset_version_ids=[1],
            ),
            GpuType.objects.get(code="cpu-local"),
        )
    if name in JobLaunchForm.base_fields and not isinstance(value, str):
        form = JobLaunchForm(data={name: value}, organization=alice_org)
        assert not form.is_valid() and name in form.errors


def test_the_form_and_the_api_share_the_bounds(alice_org):
    from instances.forms import JobLaunchForm

    for name in ("seq_len", "micro_batch", "grad_accum", "lr"):
        field = JobLaunchForm.base_fields[name]
        bound = HYPERPARAMETER_LIMITS[name]
        assert (field.min_value, field.max_value) == (bound.low, bound.high)  # type: ignore[attr-defined]


def test_logs_lines_must_be_a_number_in_range(api, alice, alice_org):
    inst = _instance(alice_org, alice)
    for value in ("abc", "0", "2001", "1e3"):
        result = _envelope(api.get(f"/api/v1/jobs/{inst.job.pk}/logs?lines={value}"), 400, "invalid")
        assert "lines" in result["error"]["details"]
    body = api.get(f"/api/v1/jobs/{inst.job.pk}/logs?lines=5").json()
    assert (body["job"], body["lines"], body["rank"]) == (inst.job.pk, [], 0)
    for query in ("rank=-1", "rank=abc", "attempt=0"):
        _envelope(api.get(f"/api/v1/jobs/{inst.job.pk}/logs?{query}"), 400, "invalid")


def test_docs_and_schema_answer_other_methods_with_405_in_the_envelope(api):
    for url in ("/api/v1/docs", "/api/v1/redoc", "/api/v1/schema"):
        for method in ("options", "post", "delete"):
            _envelope(getattr(api, method)(url), 405, "method_not_allowed")
        assert api.get(url).status_code == 200


def test_the_runtime_callback_answers_other_methods_in_the_envelope(api):
    _envelope(api.get("/api/v1/runtime/jobs/1/events"), 405, "method_not_allowed")
    _envelope(api.post("/api/v1/runtime/jobs/1/events", "[" * 50_000, content_type="application/json"), 400, "invalid")


def test_an_app_call_with_a_nul_in_its_input_is_a_400_and_costs_nothing(api, alice, alice_org):
    from billing.services import wallet_top_up
    from portal.marketplace import services
    from portal.marketplace.choices import AppState, ServingKind
    from portal.marketplace.models import AppCall

    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="t")
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="echo",
        category="general",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        price_per_call_micros=10_000,
    )
    services.app_version_add(app=app, user=alice, kind=ServingKind.ECHO)
    services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=alice)
    response = api.post(f"/api/v1/apps/{app.slug}/invoke", '{"text": "a\\u0000b"}', content_type="application/json")
    body = _envelope(response, 400, "invalid_json")
    assert "NUL" in body["error"]["message"]
    assert AppCall.objects.count() == 0


def test_the_schema_documents_bounds_errors_and_idempotency_keys():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    job = schema["components"]["schemas"]["JobLaunchRequest"]["properties"]
    assert (job["checkpoint_every_minutes"]["minimum"], job["checkpoint_every_minutes"]["maximum"]) == (0, 10_080)
    assert (job["gpu_count"]["minimum"], job["gpu_count"]["maximum"]) == (1, 1024)
    hyper = schema["components"]["schemas"]["HyperparametersRequest"]["properties"]
    assert (hyper["lr"]["minimum"], hyper["lr"]["maximum"]) == (1e-9, 1.0)
    assert hyper["seq_len"]["maximum"] == HYPERPARAMETER_LIMITS["seq_len"].high
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert {"400", "401", "403", "404", "429"} <= codes, (method, path)
            if method == "post":
                assert {"402", "409", "413", "422"} <= codes, (method, path)
    honours_key = {
        ("/api/v1/instances", "post"),
        ("/api/v1/jobs", "post"),
        ("/api/v1/apps/publish", "post"),
        ("/api/v1/apps/{slug}/invoke", "post"),
    }
    for path, method in honours_key:
        params = schema["paths"][path][method].get("parameters", [])
        assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in params), path
    assert schema["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"


def test_anonymous_and_bad_token_requests_are_throttled(api, alice_org):
    from rest_framework.throttling import SimpleRateThrottle

    from portal.api.throttling import AnonymousRateThrottle

    previous = SimpleRateThrottle.THROTTLE_RATES
    AnonymousRateThrottle.THROTTLE_RATES = {**previous, "anon": "3/min"}
    try:
        anonymous = APIClient()
        codes = [anonymous.get("/api/v1/wallet").status_code for _ in range(4)]
        assert codes == [401, 401, 401, 429]
        bad = APIClient()
        bad.credentials(HTTP_AUTHORIZATION="Bearer gpp_000000000000_" + "x" * 43)
        assert _envelope(bad.get("/api/v1/wallet"), 429, "throttled")
        assert api.get("/api/v1/wallet").status_code == 200  # a valid token has its own budget
    finally:
        AnonymousRateThrottle.THROTTLE_RATES = previous
