"""Publishing a training checkpoint as an app: a tiny model trained for real by the runtime (torchrun, one
process) on the legal corpus, exported to a Hugging Face folder by the build task, served by a local inference
process, and called through ``POST /api/v1/apps/{slug}/invoke`` — plus lineage and licenses, outsiders,
failures recorded with their stage, and the Kubernetes manifests.

A real deployment adds: a GPU (the tiny model runs on the CPU here), a worker process for the build task
(Celery runs eagerly in tests), and TLS in front of the portal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from rest_framework.test import APIClient
from serving_support import LEGAL, SHARDS_REL, STEPS  # noqa: F401 - LEGAL: other tests import it from here

ATTRIBUTION = "法律法规文本来自 LawRefBook 项目（公有领域）"
PROMPT = "第一条 为了规范合同行为"


# --- a model trained by the runtime (once per module, no database) -------------------------------------------


@pytest.fixture(scope="module")
def trained(tiny_model: dict[str, Any]) -> dict[str, Any]:
    """The tiny model trained by the runtime (``conftest.tiny_model``: tokenizer, shards under ``SHARDS_REL`` of
    ``root``, the checkpoint at the last step), shared with the other serving tests of this process."""
    return tiny_model


# --- database rows: a licensed dataset version, a training job that mounted it, its checkpoint ---------------


def _dataset_version(*, commercial_use: bool, shard_rel: str = SHARDS_REL, slug: str = "legal-laws") -> Any:
    from django.conf import settings

    from datasets.services import dataset_create, dataset_version_create, license_version_create
    from instances.runtime.shards import ShardWriter

    folder = Path(settings.DATA_DIR) / shard_rel
    if not (folder / "index.json").exists():
        with ShardWriter(folder, vocab_size=300, eos_id=0) as w:
            w.add_document([5, 6, 7])
    lv = license_version_create(
        slug=f"{slug}-license",
        name="Legal corpus license",
        text="Training use.",
        commercial_use=commercial_use,
        redistribution=False,
        derivative_models=True,
        attribution_text=ATTRIBUTION,
    )
    ds = dataset_create(slug=slug, name="Chinese laws", domain="legal", description="Laws and regulations.")
    return dataset_version_create(
        dataset=ds,
        license_version=lv,
        statistics={"documents": 1, "bytes": 1, "characters": 1, "tokens": 4, "language": "zh", "files": []},
        deid_report={},
        deid_status="deidentified",
        shard_dir=shard_rel,
        tokenizer_path=f"{shard_rel}/tokenizer.json",
        source_files=[{"file": "legal.jsonl", "bytes": 1, "sha256": "0" * 64}],
    )


def _job_with_checkpoint(org: Any, user: Any, version: Any, *, location: str, step: int = STEPS) -> Any:
    """A training job of ``org`` that mounted ``version`` (through the datasets services, after accepting its
    license) and one complete checkpoint at ``location``."""
    from datasets.selectors import required_license_version
    from datasets.services import agreement_accept, mount_attach, text_sha256
    from instances.models import Checkpoint, GpuType, Instance, TrainingJob

    lv = required_license_version(version)
    agreement_accept(
        organization=org,
        user=user,
        license_version=lv,
        shown_text_sha256=text_sha256(lv.text),
        ip="127.0.0.1",
        user_agent="pytest",
        dataset=version.dataset,
    )
    gpu, _ = GpuType.objects.get_or_create(code="cpu-local", defaults={"name": "CPU slot", "memory_gib": 0})
    instance = Instance.objects.create(
        organization=org, created_by=user, name="legal-tiny", gpu_type=gpu, gpu_count=1, status="stopped"
    )
    job = TrainingJob.objects.create(
        instance=instance,
        organization=org,
        name="legal-tiny",
        model_preset="tiny",
        engine="ddp",
        dataset_version_ids=[version.pk],
    )
    mount_attach(organization=org, user=user, version_id=version.pk, consumer=f"instances.trainingjob:{job.pk}")
    return Checkpoint.objects.create(job=job, step=step, location=location, size_bytes=1, loss=5.0)


def _api(user: Any, org: Any) -> APIClient:
    from portal.choices import TokenScope
    from portal.services import api_token_create

    client = APIClient()
    token = api_token_create(user=user, organization=org, name="t", scope=TokenScope.WRITE)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
    return client


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- the whole path ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_model_trained_on_the_legal_corpus_is_published_and_answers_invoke_with_generated_text(
    trained: dict[str, Any],
    settings: Any,
    alice: Any,
    alice_org: Any,
    bob: Any,
    charlie: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from billing.models import LedgerTransaction
    from billing.selectors import wallet_balance
    from billing.services import wallet_top_up
    from portal.marketplace import services, tasks
    from portal.marketplace.choices import AppState
    from portal.marketplace.models import App, AppCall

    settings.DATA_DIR = trained["root"]
    version_ds = _dataset_version(commercial_use=True)
    cp = _job_with_checkpoint(alice_org, alice, version_ds, location=trained["checkpoint"])
    with django_capture_on_commit_callbacks(execute=True):
        response = _api(alice, alice_org).post(
            "/api/v1/apps/publish",
            {
                "job_id": cp.job_id,
                "checkpoint_id": cp.pk,
                "name": "Legal drafting",
                "category": "legal",
                "price_per_call": "0.010000",
                "visibility": "private",
            },
            format="json",
        )
    assert response.status_code == 202, response.json()
    assert response.json()["version"]["status"] == "building"
    app = App.objects.get(slug=response.json()["app"]["slug"])
    version = app.versions.get()
    try:
        assert (version.status, version.progress, version.active, version.error) == ("ready", 100, True, "")
        export = Path(version.artifact_path)
        assert export == trained["root"] / "apps" / app.slug / "v1"
        assert {"config.json", "model.safetensors", "tokenizer.json", "export.json"} <= {
            p.name for p in export.iterdir()
        }
        assert json.loads((export / "export.json").read_text())["step"] == STEPS
        pid = version.deployment["pid"]
        assert _alive(pid) and version.deployment["stage"] == "serving"
        assert version.checkpoint_ref == f"instances.checkpoint:{cp.pk}"
        assert version.lineage == [
            {
                "dataset": "Chinese laws",
                "dataset_slug": "legal-laws",
                "dataset_version": 1,
                "dataset_version_id": version_ds.pk,
                "license": "Legal corpus license",
                "license_version": 1,
                "commercial_use": True,
                "derivative_models": True,
                "attribution": ATTRIBUTION,
            }
        ]
        assert app.attributions == [ATTRIBUTION]

        # a second delivery of the build task changes nothing (no second server)
        assert tasks.app_version_build(version.pk) == "ready"
        version.refresh_from_db()
        assert version.deployment["pid"] == pid

        # a private app goes live with its first built version: no second "Publish" (issue 18)
        assert App.objects.get(pk=app.pk).state == AppState.PUBLISHED
        wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="publish-topup")
        from portal.choices import Role
        from portal.services import membership_add

        membership_add(organization=alice_org, user=bob, role=Role.ADMIN, acting_user=alice)  # write tokens: admins
        bob_api = _api(bob, alice_org)
        payload = {"text": PROMPT, "max_new_tokens": 12}
        first = bob_api.post(f"/api/v1/apps/{app.slug}/invoke", payload, format="json", HTTP_IDEMPOTENCY_KEY="k1")
        assert first.status_code == 200, first.json()
        body = first.json()
        generated = body["output"]["output"]
        assert isinstance(generated, str) and generated.strip() and generated != PROMPT
        assert 1 <= body["output"]["tokens"] <= 12
        assert body["cost"] == "0.003000" and body["replayed"] is False
        again = bob_api.post(f"/api/v1/apps/{app.slug}/invoke", payload, format="json", HTTP_IDEMPOTENCY_KEY="k1")
        assert again.json()["replayed"] is True and again.json()["call_id"] == body["call_id"]
        assert again.json()["output"] == body["output"]
        assert AppCall.objects.get().status == "succeeded"
        assert LedgerTransaction.objects.filter(kind="app_call").count() == 1
        assert wallet_balance(organization=alice_org).total_micros == 997_000  # its own app: 0.01 less its 70 % share

        outsider = _api(charlie, charlie.organizations.get()).post(
            f"/api/v1/apps/{app.slug}/invoke", payload, format="json"
        )
        assert outsider.status_code == 404 and AppCall.objects.count() == 1
    finally:
        services.app_version_undeploy(version=App.objects.get(pk=app.pk).versions.get())
    version.refresh_from_db()
    assert not _alive(pid) and version.deployment["pid"] is None and version.deployment["stage"] == "stopped"


# --- licenses, outsiders, failures ---------------------------------------------------------------------------


def test_publishing_public_or_paid_is_refused_when_a_training_license_forbids_commercial_use_and_private_is_allowed(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace import services
    from portal.marketplace.choices import AppState

    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=False), location=str(tmp_path))
    apps = {}
    for label, visibility, price in (("public", "public", 0), ("paid", "private", 10_000), ("private", "private", 0)):
        with django_capture_on_commit_callbacks(execute=False) as queued:
            apps[label] = services.app_publish_from_checkpoint(
                organization=alice_org,
                user=alice,
                job_id=cp.job_id,
                checkpoint_id=cp.pk,
                name=f"Legal {label}",
                category="legal",
                visibility=visibility,
                price_per_call_micros=price,
            )
        assert len(queued) == 1  # the build task, enqueued after commit
        version = apps[label].versions.get()
        assert version.lineage[0]["commercial_use"] is False and version.status == "building"
        services.app_version_activate(version=version)  # the build itself is exercised by the slow test

    reason = "Chinese laws (Legal corpus license) does not allow commercial use"
    with pytest.raises(services.LicenseForbidsPublishing) as refused:
        services.app_transition(app=apps["public"], to=AppState.IN_REVIEW, acting_user=alice)
    assert refused.value.details == [reason]
    with pytest.raises(services.LicenseForbidsPublishing, match=re.escape(reason)):
        services.app_transition(app=apps["paid"], to=AppState.PUBLISHED, acting_user=alice)
    assert services.app_transition(app=apps["private"], to=AppState.PUBLISHED, acting_user=alice).state == "published"
    apps["public"].refresh_from_db()
    apps["paid"].refresh_from_db()
    assert (apps["public"].state, apps["paid"].state) == ("draft", "draft")

    # the same model as a new version of a published paid app of the organization is refused, nothing written
    from portal.marketplace.models import App, AppVersion

    paid_app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Paid echo",
        category="legal",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        price_per_call_micros=10_000,
        visibility="private",
    )
    services.app_version_add(app=paid_app, user=alice, kind="echo")
    services.app_transition(app=paid_app, to=AppState.PUBLISHED, acting_user=alice)
    with pytest.raises(services.LicenseForbidsPublishing, match=re.escape(reason)):
        services.app_publish_from_checkpoint(
            organization=alice_org, user=alice, job_id=cp.job_id, checkpoint_id=cp.pk, app_slug=paid_app.slug
        )
    assert list(AppVersion.objects.filter(app=paid_app).values_list("number", "kind", "active")) == [(1, "echo", True)]
    assert App.objects.get(pk=paid_app.pk).state == "published"


def test_the_publish_page_shows_the_licenses_and_the_job_page_links_to_it(
    settings: Any, tmp_path: Path, client: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace.models import App

    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=False), location=str(tmp_path))
    client.force_login(alice)
    url = f"/o/{alice_org.slug}/apps/publish/{cp.job_id}/{cp.pk}/"
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('data-testid="lineage-row"') == 1 and 'data-testid="license-problems"' in html
    assert ATTRIBUTION in html
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            url,
            {
                "name": "Clause finder",
                "category": "legal",
                "description": "",
                "price_per_call": "0",
                "price_per_1k_tokens": "0.002",
                "visibility": "private",
            },
        )
    app = App.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/o/{alice_org.slug}/apps/{app.slug}/"
    assert (app.price_per_call_micros, app.price_per_1k_tokens_micros) == (0, 2_000)
    assert app.versions.get().status == "building"
    detail = client.get(response["Location"]).content.decode()
    assert 'data-testid="version-row"' in detail
    job_page = client.get(f"/o/{alice_org.slug}/jobs/{cp.job_id}/").content.decode()
    assert url in job_page


def test_an_outsider_cannot_publish_someone_elses_checkpoint(
    settings: Any, tmp_path: Path, client: Any, alice: Any, alice_org: Any, charlie: Any
) -> None:
    from portal.marketplace.models import App, AppVersion

    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(tmp_path))
    charlie_org = charlie.organizations.get()
    response = _api(charlie, charlie_org).post(
        "/api/v1/apps/publish", {"job_id": cp.job_id, "checkpoint_id": cp.pk, "name": "Stolen"}, format="json"
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    client.force_login(charlie)
    assert client.get(f"/o/{charlie_org.slug}/apps/publish/{cp.job_id}/{cp.pk}/").status_code == 404
    assert client.get(f"/o/{alice_org.slug}/apps/publish/{cp.job_id}/{cp.pk}/").status_code == 404
    assert App.objects.count() == 0 and AppVersion.objects.count() == 0


def test_a_build_that_fails_records_its_stage_and_cause_and_the_app_cannot_go_live(
    settings: Any,
    tmp_path: Path,
    alice: Any,
    alice_org: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from portal.marketplace import services
    from portal.marketplace.choices import AppState

    settings.DATA_DIR = tmp_path
    # storage the web process does not see (the export worker does): the publish is accepted as recorded
    monkeypatch.setattr("instances.checkpoints.checkpoints_reconcile", lambda **kw: {})
    partial = tmp_path / "checkpoints" / "step-00000040"
    partial.mkdir(parents=True)
    (partial / "__0_0.distcp").write_bytes(b"\0" * 16)  # shards without DCP's .metadata commit marker
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(partial))
    with django_capture_on_commit_callbacks(execute=True):
        app = services.app_publish_from_checkpoint(
            organization=alice_org, user=alice, job_id=cp.job_id, checkpoint_id=cp.pk, name="Broken", category="legal"
        )
    version = app.versions.get()
    assert (version.status, version.active) == ("failed", False)
    assert version.error == (
        f"export: ExportError: checkpoint {partial} is not complete (no .metadata): it cannot be exported"
    )
    assert version.deployment["failed_stage"] == "export"
    assert not (tmp_path / "apps" / app.slug / "v1").exists()
    with pytest.raises(services.MarketplaceError, match="no ready version"):
        services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=alice)


# --- Kubernetes ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.33.0", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("gpus", [0, 1])
def test_the_kubernetes_deployment_and_service_validate_strictly(version: str, gpus: int) -> None:
    """A real cluster also runs admission (quotas, the NVIDIA device plugin) and needs the model PVC to exist;
    the schema checks field names, types and structure."""
    from instances.serving import kubernetes_manifests

    manifests = kubernetes_manifests(
        name="app-legal-drafting-v1",
        namespace="apps",
        gpus=gpus,
        image="registry.example/gpu-portal-runtime:1.0",
        model_claim="app-models",
        model_path="legal-drafting/v1",
    )
    assert [m["kind"] for m in manifests] == ["Deployment", "Service"]
    for manifest in manifests:
        assert kubernetes_validate.validate(manifest, version, strict=True) == version[:4]
    container = manifests[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:4] == ["python", "-m", "instances.serving.server", "serve"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8080}
    assert ("nvidia.com/gpu" in container["resources"]["limits"]) is bool(gpus)
    assert manifests[1]["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8080}]
