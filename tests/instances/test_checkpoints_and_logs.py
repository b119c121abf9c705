"""The checkpoint list is the truth (pruned checkpoints, pins, refusals that never touch the running job),
per-rank logs in the console and the API (live from the pod, archived after it), and the job page's summary.

The Kubernetes tests run the portal against the cluster stand-in (tests/instances/k8s_standin.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from instances_support import FakeBackend, fund, training_job_launch
from k8s_standin import StandinCluster
from rest_framework.test import APIClient

from instances.backends.kubernetes import KubernetesBackend, object_name

NS = "train"


@pytest.fixture
def job(
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> Any:
    """alice's running job (local backend stand-in) with checkpoints at steps 10, 20, 30 on disk."""
    job = training_job_launch(
        organization=funded,
        user=alice,
        version=licensed,
        capture=django_capture_on_commit_callbacks,
        name="legal",
        max_steps=100,
    )
    report(job, [{"seq": 1, "type": "started", "step": 0}])
    return job


def report(job: Any, events: list[dict[str, Any]], number: int = 1) -> dict[str, bool]:
    from instances.services import attempt_token, job_events_receive

    token = attempt_token(job.attempts.get(number=number))
    return job_events_receive(job_id=job.pk, token=token, body={"attempt": number, "events": events})


def checkpoint_folders(root: Path, job: Any, steps: tuple[int, ...]) -> None:
    """Complete DCP folders ``step-%08d`` (with ``.metadata``) under ``root`` (made), reported by the runtime."""
    root.mkdir(exist_ok=True)
    events = []
    for i, step in enumerate(steps):
        folder = root / f"step-{step:08d}"
        folder.mkdir(parents=True)
        (folder / ".metadata").write_bytes(b"m")
        events.append({"seq": 100 + i, "type": "checkpoint", "step": step, "path": str(folder), "bytes": 1})
    report(job, events)


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    """The job's checkpoint folder."""
    return tmp_path / "checkpoints"


def api_for(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_a_pruned_checkpoint_is_kept_as_history_without_actions_and_never_resumed(
    client: Any, alice: Any, funded: Any, job: Any, ckpt: Path
) -> None:
    from instances.selectors import newest_complete_checkpoint

    checkpoint_folders(ckpt, job, (10, 20, 30))
    pruned = job.checkpoints.get(step=10)

    answer = report(job, [{"seq": 200, "type": "checkpoint_pruned", "step": 10, "path": pruned.location}])
    report(job, [{"seq": 200, "type": "checkpoint_pruned", "step": 10, "path": pruned.location}])  # resent
    report(job, [{"seq": 201, "type": "checkpoint_pruned", "step": 20, "path": "/elsewhere/step-20"}])
    pruned.refresh_from_db()

    assert answer == {"checkpoint_requested": False, "stop_requested": False}
    assert pruned.deleted_at is not None
    assert list(job.checkpoints.filter(deleted_at__isnull=True).values_list("step", flat=True)) == [30, 20]
    assert newest_complete_checkpoint(job).step == 30
    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()
    assert html.count('data-testid="checkpoint-deleted"') == 1
    from django.urls import reverse

    live = job.checkpoints.get(step=30)
    for name in ("job_rollback", "app_publish"):
        assert reverse(name, args=[funded.slug, job.pk, pruned.pk]) not in html
        assert reverse(name, args=[funded.slug, job.pk, live.pk]) in html
    listed = api_for(alice).get(f"/api/v1/jobs/{job.pk}/checkpoints").json()
    assert [(c["step"], c["deleted_at"] is not None) for c in listed] == [(30, False), (20, False), (10, True)]


def test_rollback_to_a_pruned_step_is_refused_and_the_job_keeps_running(
    alice: Any, funded: Any, job: Any, fake_backend: FakeBackend, ckpt: Path
) -> None:
    from instances.models import Instance

    checkpoint_folders(ckpt, job, (10, 20))
    pruned = job.checkpoints.get(step=10)
    report(job, [{"seq": 300, "type": "checkpoint_pruned", "step": 10, "path": pruned.location}])
    before = Instance.objects.get(pk=job.instance.pk)

    resp = api_for(alice).post(f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": pruned.pk}, format="json")
    job.refresh_from_db()

    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == (
        "The checkpoint at step 10 no longer exists: the job deleted it to keep only its newest checkpoints. "
        "Choose a checkpoint that is still listed, or pin checkpoints you want to keep. Checkpoints you can use: "
        "steps 20."
    )
    assert (before.status, job.instance.status) == ("running", "running")
    assert (job.resume_step, job.restart_after_stop, job.stop_requested) == (-1, False, False)
    assert fake_backend.stopped == [] and job.attempts.count() == 1


def test_publishing_a_pruned_checkpoint_is_refused(alice: Any, funded: Any, job: Any, ckpt: Path) -> None:
    from portal.marketplace.services import MarketplaceError, app_publish_from_checkpoint

    checkpoint_folders(ckpt, job, (10,))
    pruned = job.checkpoints.get()
    report(job, [{"seq": 300, "type": "checkpoint_pruned", "step": 10, "path": pruned.location}])

    with pytest.raises(MarketplaceError, match="the job deleted it to keep only its newest checkpoints"):
        app_publish_from_checkpoint(
            organization=funded, user=alice, job_id=job.pk, checkpoint_id=pruned.pk, name="legal"
        )


def test_a_pinned_checkpoint_survives_the_runtimes_keep_last_k(alice: Any, funded: Any, job: Any, ckpt: Path) -> None:
    """The runtime's own prune (instances/runtime/checkpoint.py) reads the PINNED marker the portal writes."""
    from instances.runtime.checkpoint import CheckpointStore

    checkpoint_folders(ckpt, job, (10, 20, 30))
    first = job.checkpoints.get(step=10)

    resp = api_for(alice).post(f"/api/v1/jobs/{job.pk}/checkpoints/{first.pk}/pin", {}, format="json")
    deleted = CheckpointStore(str(ckpt)).prune(keep_last=1)

    assert resp.status_code == 200 and resp.json()["pinned"] is True
    assert (ckpt / "step-00000010" / "PINNED").is_file()
    assert [f.path for f in deleted] == [str(ckpt / "step-00000020")]  # 10 pinned, 30 the newest; 20 goes
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-00000010", "step-00000030"]
    unpin = api_for(alice).post(f"/api/v1/jobs/{job.pk}/checkpoints/{first.pk}/pin", {"pinned": False}, format="json")
    assert unpin.json()["pinned"] is False and not (ckpt / "step-00000010" / "PINNED").exists()


def test_pinning_another_organizations_checkpoint_is_404_and_writes_nothing(
    alice: Any, charlie: Any, client: Any, funded: Any, job: Any, ckpt: Path
) -> None:
    from portal.selectors import organization_for_user

    checkpoint_folders(ckpt, job, (10,))
    cp = job.checkpoints.get()
    charlie_org = organization_for_user(user=charlie)

    as_charlie = api_for(charlie).post(f"/api/v1/jobs/{job.pk}/checkpoints/{cp.pk}/pin", {}, format="json")
    foreign_id = api_for(alice).post(f"/api/v1/jobs/{job.pk}/checkpoints/{cp.pk + 999}/pin", {}, format="json")
    client.force_login(charlie)
    console = client.post(f"/o/{charlie_org.slug}/jobs/{job.pk}/checkpoints/{cp.pk}/pin/")
    cp.refresh_from_db()

    assert (as_charlie.status_code, as_charlie.json()["error"]["code"]) == (404, "not_found")
    assert (foreign_id.status_code, foreign_id.json()["error"]["code"]) == (404, "not_found")
    assert console.status_code == 404
    assert cp.pinned is False and not (ckpt / "step-00000010" / "PINNED").exists()


def test_pinning_a_pruned_checkpoint_is_refused_with_a_reason(alice: Any, job: Any, ckpt: Path) -> None:
    checkpoint_folders(ckpt, job, (10,))
    cp = job.checkpoints.get()
    report(job, [{"seq": 300, "type": "checkpoint_pruned", "step": 10, "path": cp.location}])

    resp = api_for(alice).post(f"/api/v1/jobs/{job.pk}/checkpoints/{cp.pk}/pin", {}, format="json")

    assert resp.status_code == 409
    assert resp.json()["error"] == {
        "code": "checkpoint_unavailable",
        "details": None,
        "message": "The checkpoint at step 10 was already deleted; it cannot be pinned.",
    }


def test_a_rollback_pins_its_target_so_the_final_checkpoint_cannot_prune_it(
    alice: Any, job: Any, ckpt: Path, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.services import job_rollback

    checkpoint_folders(ckpt, job, (10, 20))
    with django_capture_on_commit_callbacks(execute=True):
        job_rollback(job=job, checkpoint_id=job.checkpoints.get(step=10).pk, acting_user=alice)

    assert (ckpt / "step-00000010" / "PINNED").is_file()
    assert job.checkpoints.get(step=10).pinned is True


def test_the_job_page_shows_dataset_versions_cost_so_far_and_elapsed_time(
    client: Any, alice: Any, funded: Any, job: Any, licensed: Any
) -> None:
    from django.utils import timezone

    from billing.metering import metering_tick
    from billing.models import GpuPrice
    from instances.models import InstanceRunSegment

    GpuPrice.objects.update(effective_from=timezone.now() - timedelta(hours=1))  # priced before the launch
    segment = InstanceRunSegment.objects.get(instance=job.instance)
    metering_tick(now=segment.started_at + timedelta(minutes=3))  # minutes 0 … 3 of the segment
    client.force_login(alice)

    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()

    # 2 cpu-local slots at 0.60 CNY per slot-hour: 4 started minutes = 0.08 CNY
    assert '<strong data-testid="job-cost">¥0.08</strong>' in html
    assert f'<a href="/o/{funded.slug}/datasets/{licensed.dataset_id}/" data-testid="job-dataset">Corpus v1</a>' in html
    assert 'data-testid="job-running">0:00:' in html


# --- logs on Kubernetes ----------------------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        for name in ("a100-0", "a100-1"):
            c.add_node(name, gpus=8, product="NVIDIA-A100-SXM4-80GB")
        yield c


@pytest.fixture
def k8s_job(
    alice_org: Any,
    alice: Any,
    licensed: Any,
    cluster: StandinCluster,
    catalog: None,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> Any:
    """A 2-pod job on the stand-in, both pods running and logging."""
    from instances import services

    fund(alice_org, 1000)
    settings.INSTANCES_BACKEND = "kubernetes"
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    monkeypatch.setattr(services.backend, "compute_backend", lambda: backend)
    services.nodes_sync(backend=backend)
    with django_capture_on_commit_callbacks(execute=True):
        inst = services.instance_launch(
            organization=alice_org,
            user=alice,
            spec=services.LaunchSpec(
                name="k",
                gpu_type="A100-80G-SXM",
                gpu_count=16,
                dataset_version_ids=[licensed.pk],
                hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": 100},
            ),
        )
    name = object_name(f"job-{inst.job.pk}", 1)
    for rank in (0, 1):
        pod = cluster.pod(NS, f"{name}-{rank}-")["metadata"]["name"]
        cluster.write_log(NS, pod, "\n".join(f"[node {rank}] step {s}" for s in range(1, 4)))
    return inst.job


def test_pod_logs_per_rank_in_the_api_and_console_and_archived_after_the_pods_are_gone(
    client: Any,
    alice: Any,
    alice_org: Any,
    charlie: Any,
    k8s_job: Any,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Relies on: the pod log subresource, the completion-index annotation, Foreground deletion on stop."""
    from instances.services import instance_stop

    api = api_for(alice)
    url = f"/api/v1/jobs/{k8s_job.pk}/logs"

    default = api.get(url).json()
    second = api.get(url, {"rank": 1, "lines": 2}).json()
    unknown = api.get(url, {"rank": 2})
    client.force_login(alice)
    page = client.get(f"/o/{alice_org.slug}/jobs/{k8s_job.pk}/logs/", {"rank": 1}).content.decode()
    missing_page = client.get(f"/o/{alice_org.slug}/jobs/{k8s_job.pk}/logs/", {"rank": 7})
    with django_capture_on_commit_callbacks(execute=True):
        instance_stop(instance=k8s_job.instance, reason="done", acting_user=alice)
    after = api.get(url, {"rank": 1}).json()

    assert default == {
        "job": k8s_job.pk,
        "attempt": 1,
        "next_attempt": None,
        "rank": 0,
        "ranks": 2,
        "source": "live",
        "lines": ["[node 0] step 1", "[node 0] step 2", "[node 0] step 3"],
        "first": 0,
        "cursor": 3,
        "dropped": 0,
        "more": False,
    }
    assert (second["rank"], second["lines"]) == (1, ["[node 1] step 2", "[node 1] step 3"])
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {
        "code": "unknown_rank",
        "details": {"field": "rank"},
        "message": "Rank 2 does not exist: attempt 1 has ranks 0 to 1.",
    }
    assert "[node 1] step 3" in page and 'data-testid="rank-picker"' in page
    assert missing_page.status_code == 404
    assert "Rank 7 does not exist: attempt 1 has ranks 0 to 1." in missing_page.content.decode()
    assert cluster.pods(NS) == []
    assert (after["source"], after["lines"]) == ("archive", ["[node 1] step 1", "[node 1] step 2", "[node 1] step 3"])
    assert api_for(charlie).get(url).status_code == 404
    assert json.loads(json.dumps(after))["ranks"] == 2


def test_a_preempted_attempts_logs_stay_readable_after_the_cluster_deleted_its_pods(
    alice: Any,
    k8s_job: Any,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Relies on: FailJob on DisruptionTarget deleting the gang's pods (they vanish once terminated); the
    reconcile archived the running pods' logs before."""
    from django.utils import timezone
    from kubernetes import client

    from instances import services

    backend = services.backend.compute_backend()
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        services.instances_reconcile(now=now, backend=backend)  # running: the first copy is taken
    name = object_name(f"job-{k8s_job.pk}", 1)
    victim = cluster.pod(NS, f"{name}-0-")["metadata"]["name"]
    client.CoreV1Api(cluster.api_client()).create_namespaced_pod_eviction(
        victim, NS, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": NS}}
    )
    with django_capture_on_commit_callbacks(execute=True):
        services.instances_reconcile(now=now + timedelta(minutes=1), backend=backend)

    old = api_for(alice).get(f"/api/v1/jobs/{k8s_job.pk}/logs", {"attempt": 1, "rank": 1}).json()

    assert k8s_job.attempts.get(number=1).state == "preempted"
    assert cluster.pods(NS, f"gpu-portal/job={name}") == []
    assert (old["attempt"], old["source"], old["lines"]) == (
        1,
        "archive",
        ["[node 1] step 1", "[node 1] step 2", "[node 1] step 3"],
    )


def test_a_step_saved_again_after_its_prune_is_listed_again(job: Any, ckpt: Path) -> None:
    checkpoint_folders(ckpt, job, (10,))
    path = job.checkpoints.get().location
    report(job, [{"seq": 300, "type": "checkpoint_pruned", "step": 10, "path": path}])

    report(job, [{"seq": 301, "type": "checkpoint", "step": 10, "path": path, "bytes": 2}])

    assert (job.checkpoints.get().deleted_at, job.checkpoints.get().size_bytes) == (None, 2)


# --- following a log by offset (issue 24, item 7) -----------------------------------------------------------


def _local_log(job: Any, tmp_path: Path) -> Path:
    """The job's attempt 1 as the local backend records it (a ``local:`` handle naming a workspace) with its
    real log file on disk, written by the test."""
    ws = tmp_path / "ws" / "attempt-1"
    ws.mkdir(parents=True)
    job.attempts.filter(number=1).update(handle=f"local:1:{ws}")
    return ws / "logs.txt"


def _page(api: APIClient, job: Any, **query: Any) -> dict[str, Any]:
    answer = api.get(f"/api/v1/jobs/{job.pk}/logs", query)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    return {k: body[k] for k in ("attempt", "next_attempt", "lines", "first", "cursor", "dropped", "more")}


def test_the_logs_api_answers_by_offset_with_exact_cursors(job: Any, alice: Any, tmp_path: Path) -> None:
    from instances.models import JobAttempt

    log = _local_log(job, tmp_path)
    log.write_bytes(b"same\nsame\nsame\nother\r\nhalf")  # a line still being written: not served yet
    api = api_for(alice)
    tail = {"attempt": 1, "next_attempt": None}
    assert _page(api, job) == {
        **tail,
        "lines": ["same", "same", "same", "other"],
        "first": 0,
        "cursor": 4,
        "dropped": 0,
        "more": False,
    }
    assert _page(api, job, after=1, lines=2) == {
        **tail,
        "lines": ["same", "same"],
        "first": 1,
        "cursor": 3,
        "dropped": 0,
        "more": True,
    }
    assert _page(api, job, after=3, lines=2)["lines"] == ["other"]
    assert _page(api, job, after=4) == {**tail, "lines": [], "first": 4, "cursor": 4, "dropped": 0, "more": False}
    assert _page(api, job, after=99)["cursor"] == 4  # past the end: nothing new yet
    with open(log, "ab") as fh:  # the half line ends, then a burst of three windows
        fh.write(b" done\n" + b"".join(b"tick %d\n" % i for i in range(4500)))
    burst = _page(api, job, after=4, lines=2000)
    assert (burst["lines"][:2], burst["first"], burst["cursor"], burst["more"]) == (
        ["half done", "tick 0"],
        4,
        2004,
        True,
    )
    rest = _page(api, job, after=4004, lines=2000)
    assert (len(rest["lines"]), rest["lines"][-1], rest["cursor"], rest["more"]) == (501, "tick 4499", 4505, False)
    # the attempt ended with a last line without a newline: it is served now
    with open(log, "ab") as fh:
        fh.write(b"Traceback: the end")
    assert _page(api, job, after=4505)["lines"] == []
    JobAttempt.objects.filter(job=job, number=1).update(state="failed")
    assert _page(api, job, after=4505)["lines"] == ["Traceback: the end"]
    # a second attempt: the first one says so, and each attempt's offsets are its own
    second = JobAttempt.objects.create(instance=job.instance, job=job, number=2, backend="local")
    ws2 = tmp_path / "ws" / "attempt-2"
    ws2.mkdir()
    (ws2 / "logs.txt").write_text("resumed at step 40\n")
    JobAttempt.objects.filter(pk=second.pk).update(handle=f"local:2:{ws2}")
    assert _page(api, job, attempt=1, after=4506)["next_attempt"] == 2
    assert _page(api, job, attempt=2, after=0) == {
        "attempt": 2,
        "next_attempt": None,
        "lines": ["resumed at step 40"],
        "first": 0,
        "cursor": 1,
        "dropped": 0,
        "more": False,
    }
    for bad in ("-1", "x", "1.5", str(2**64)):
        refused = api.get(f"/api/v1/jobs/{job.pk}/logs", {"after": bad})
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid")


def test_a_follower_behind_the_archived_copy_is_told_exactly_how_many_lines_are_gone(
    alice: Any,
    k8s_job: Any,
    cluster: StandinCluster,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The pods' logs are copied (their last 4 lines, with the offset of the first) before the stop deletes
    them; a follower still at offset 2 learns that 4 lines are gone, then reads on from offset 6."""
    from instances.services import instance_stop

    settings.INSTANCES_LOG_ARCHIVE_LINES = 4
    name = object_name(f"job-{k8s_job.pk}", 1)
    pod = cluster.pod(NS, f"{name}-1-")["metadata"]["name"]
    cluster.write_log(NS, pod, "\n".join(f"[node 1] step {s}" for s in range(4, 11)))  # 10 lines in all
    api = api_for(alice)
    live = _page(api, k8s_job, rank=1, after=0, lines=2)
    assert (live["lines"], live["cursor"], live["more"]) == (["[node 1] step 1", "[node 1] step 2"], 2, True)
    with django_capture_on_commit_callbacks(execute=True):
        instance_stop(instance=k8s_job.instance, reason="done", acting_user=alice)
    assert cluster.pods(NS) == []
    assert _page(api, k8s_job, rank=1, after=2) == {
        "attempt": 1,
        "next_attempt": None,
        "lines": ["[node 1] step 7", "[node 1] step 8", "[node 1] step 9", "[node 1] step 10"],
        "first": 6,
        "cursor": 10,
        "dropped": 4,
        "more": False,
    }
    assert _page(api, k8s_job, rank=1, after=10)["lines"] == []


def test_a_live_log_the_cluster_rotated_is_read_from_its_new_start_with_an_unknown_gap(
    alice: Any, k8s_job: Any, cluster: StandinCluster
) -> None:
    name = object_name(f"job-{k8s_job.pk}", 1)
    pod = cluster.pod(NS, f"{name}-0-")["metadata"]["name"]
    api = api_for(alice)
    assert _page(api, k8s_job, after=0)["cursor"] == 3
    cluster.logs[(NS, pod)] = ["[node 0] after rotation"]  # the kubelet's new file holds one line so far
    assert _page(api, k8s_job, after=3) == {
        "attempt": 1,
        "next_attempt": None,
        "lines": ["[node 0] after rotation"],
        "first": 0,
        "cursor": 1,
        "dropped": None,
        "more": False,
    }
