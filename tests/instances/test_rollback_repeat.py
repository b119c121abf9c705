"""Rollback can be repeated (issue 25, item 2): the stop a rollback asks for writes a final checkpoint from the
timeline being abandoned, which is recorded set aside; the checkpoint list is re-read from storage before a
rollback or a publish is accepted; a checkpoint no longer there is refused with the steps that can be used,
nothing stopped; the job page's header follows the kept timeline; console times carry their zone.

The compute backend is the stand-in (its stop is immediate: the next attempt is placed at once, so the stop's
final checkpoint arrives as a late report of the replaced attempt). The real runtime's three rollbacks in a
row are in ``test_rollback_local.py``.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from instances_support import FakeBackend, training_job_launch
from rest_framework.test import APIClient


def report(job: Any, events: list[dict[str, Any]], number: int = 1) -> dict[str, bool]:
    """What attempt ``number``'s runtime posts (through the callback service, as the HTTP view does)."""
    from instances.services import attempt_token, job_events_receive

    token = attempt_token(job.attempts.get(number=number))
    return job_events_receive(job_id=job.pk, token=token, body={"attempt": number, "events": events})


def save(root: Path, step: int) -> dict[str, Any]:
    """A complete DCP folder ``step-N`` under ``root`` and the runtime's ``checkpoint`` event for it."""
    folder = root / f"step-{step:08d}"
    folder.mkdir(parents=True)
    (folder / ".metadata").write_bytes(b"m")
    return {
        "seq": 1000 + step,
        "type": "checkpoint",
        "step": step,
        "path": str(folder),
        "bytes": 1,
        "loss": 9 - step / 10,
    }


def progress(steps: range) -> list[dict[str, Any]]:
    """``progress`` events: loss 9 - step/10 (so the loss names its step)."""
    return [{"seq": s, "type": "progress", "step": s, "loss": 9 - s / 10, "tokens_seen": 64 * s} for s in steps]


def api_for(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints"


@pytest.fixture
def job(
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> Any:
    """alice's running job (stand-in backend): trained to step 22, checkpoints at 10 and 20 on disk."""
    job = training_job_launch(
        organization=funded, user=alice, version=licensed, capture=django_capture_on_commit_callbacks, max_steps=100
    )
    report(job, [{"seq": 0, "type": "started", "step": 0}, *progress(range(1, 23))])
    return job


def listed(job: Any) -> list[tuple[int, bool, bool]]:
    """The API's checkpoint list: (step, rolled_back, deleted)."""
    from portal.models import User

    rows = api_for(User.objects.get(email="alice@example.com")).get(f"/api/v1/jobs/{job.pk}/checkpoints").json()
    return [(c["step"], c["rolled_back"], c["deleted_at"] is not None) for c in rows]


def test_a_rollbacks_own_final_checkpoint_is_set_aside_and_rolling_back_to_it_is_refused_while_the_job_runs(
    client: Any,
    alice: Any,
    funded: Any,
    job: Any,
    ckpt: Path,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.models import Instance

    report(job, [save(ckpt, 10), save(ckpt, 20)])
    target = job.checkpoints.get(step=10)
    with django_capture_on_commit_callbacks(execute=True):
        resp = api_for(alice).post(f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": target.pk}, format="json")
    assert resp.status_code == 200, resp.content
    # the stop writes its final checkpoint (step 23) and reports it after the next attempt was placed
    report(job, [*progress(range(23, 24)), save(ckpt, 23)])
    job.refresh_from_db()

    assert fake_backend.stopped == [job.attempts.get(number=1).handle]
    assert job.attempts.get(number=2).resume_from_step == 10
    assert listed(job) == [(23, True, False), (20, True, False), (10, False, False)]
    assert job.last_step == 10  # the abandoned timeline's step 23 does not move the job

    # the next attempt's runtime moves 20 and 23 aside on disk, resumes at 10 and trains on
    aside = ckpt / "rolled-back-1"
    aside.mkdir()
    for step in (20, 23):
        shutil.move(ckpt / f"step-{step:08d}", aside / f"step-{step:08d}")
    report(job, [{"seq": 0, "type": "started", "step": 10}, *progress(range(11, 13))], number=2)
    job.refresh_from_db()
    assert (job.last_step, job.instance.status) == (12, "running")

    # rolling back to the abandoned step: refused with the steps there are, nothing stopped
    before = (Instance.objects.get(pk=job.instance_id).status, job.attempts.count(), list(fake_backend.stopped))
    stale = job.checkpoints.get(step=23)
    with django_capture_on_commit_callbacks(execute=True):
        resp = api_for(alice).post(f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": stale.pk}, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"] == {
        "code": "unknown_checkpoint",
        "message": "The checkpoint at step 23 was set aside by a rollback. Checkpoints you can use: steps 10.",
        "details": {"field": "checkpoint", "available_steps": [10]},
    }
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(f"/o/{funded.slug}/jobs/{job.pk}/rollback/{stale.pk}/", follow=True)
    assert "The checkpoint at step 23 was set aside by a rollback. Checkpoints you can use: steps 10." in (
        page.content.decode()
    )
    job.refresh_from_db()
    after = (Instance.objects.get(pk=job.instance_id).status, job.attempts.count(), list(fake_backend.stopped))
    assert before == after == ("running", 2, [job.attempts.get(number=1).handle])
    assert (job.resume_step, job.restart_after_stop, job.stop_requested) == (-1, False, False)

    # and the rollback repeats: to the kept step again
    with django_capture_on_commit_callbacks(execute=True):
        resp = api_for(alice).post(f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": target.pk}, format="json")
    assert resp.status_code == 200
    assert job.attempts.get(number=3).resume_from_step == 10


def test_a_checkpoint_gone_from_storage_is_refused_naming_the_steps_left_and_nothing_stops(
    client: Any,
    alice: Any,
    charlie: Any,
    funded: Any,
    job: Any,
    ckpt: Path,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from portal.marketplace.services import MarketplaceError, app_publish_from_checkpoint

    report(job, [save(ckpt, 10), save(ckpt, 20), save(ckpt, 30)])
    shutil.rmtree(ckpt / "step-00000030")  # deleted behind the portal's back
    (ckpt / "rolled-back-7").mkdir()  # set aside by a runtime the portal did not hear from
    shutil.move(ckpt / "step-00000020", ckpt / "rolled-back-7" / "step-00000020")
    gone, aside = job.checkpoints.get(step=30), job.checkpoints.get(step=20)
    assert listed(job) == [(30, False, False), (20, False, False), (10, False, False)]  # not re-read yet

    client.force_login(charlie)  # an outsider: 404, and nothing is re-read or marked
    from portal.selectors import organization_for_user

    outsider = client.post(f"/o/{organization_for_user(user=charlie).slug}/jobs/{job.pk}/rollback/{gone.pk}/")
    assert outsider.status_code == 404
    assert api_for(charlie).post(f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": gone.pk}).status_code == 404
    assert listed(job) == [(30, False, False), (20, False, False), (10, False, False)]

    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(f"/o/{funded.slug}/jobs/{job.pk}/rollback/{gone.pk}/", follow=True)
    assert (
        "The checkpoint at step 30 is no longer in the job&#x27;s checkpoint storage. Checkpoints you can use: "
        "steps 10." in page.content.decode()
    )
    assert listed(job) == [(30, False, True), (20, True, False), (10, False, False)]
    with django_capture_on_commit_callbacks(execute=True):
        resp = api_for(alice).post(f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": aside.pk}, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == (
        "The checkpoint at step 20 was set aside by a rollback. Checkpoints you can use: steps 10."
    )
    with pytest.raises(MarketplaceError) as refused:
        app_publish_from_checkpoint(organization=funded, user=alice, job_id=job.pk, checkpoint_id=gone.pk, name="x")
    assert str(refused.value) == (
        "The checkpoint at step 30 no longer exists: the job deleted it to keep only its newest checkpoints. "
        "Choose a checkpoint that is still listed, or pin checkpoints you want to keep. Checkpoints you can use: "
        "steps 10."
    )
    job.refresh_from_db()
    assert (job.instance.status, job.attempts.count(), fake_backend.stopped) == ("running", 1, [])
    assert (job.resume_step, job.restart_after_stop, job.stop_requested, job.last_step) == (-1, False, False, 22)


def test_storage_the_portal_cannot_see_leaves_the_list_as_the_runtime_reported_it(alice: Any, job: Any) -> None:
    """A cluster volume not mounted in the portal: its root does not exist from here; nothing is marked."""
    from instances.checkpoints import checkpoints_reconcile

    report(job, [{"seq": 500, "type": "checkpoint", "step": 10, "path": "/not-mounted/job-1/step-00000010"}])
    assert checkpoints_reconcile(job=job) == {}
    assert listed(job) == [(10, False, False)]


def test_after_a_rollback_the_job_page_shows_the_step_loss_and_curve_of_the_kept_timeline(
    client: Any, alice: Any, funded: Any, job: Any, ckpt: Path, django_capture_on_commit_callbacks: Any
) -> None:
    report(job, [save(ckpt, 10), save(ckpt, 20)])
    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()
    assert '<strong data-testid="job-step">22</strong>' in html and "loss 6.8000" in html  # 9 - 22/10

    with django_capture_on_commit_callbacks(execute=True):
        api_for(alice).post(
            f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": job.checkpoints.get(step=10).pk}, format="json"
        )
    report(job, progress(range(23, 25)))  # the stopping attempt's last reports
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert '<strong data-testid="job-step">10</strong>' in html
    assert "loss 8.0000" in html and "loss 6.8000" not in html  # step 10's loss, not step 22's
    points = api_for(alice).get(f"/api/v1/jobs/{job.pk}/metrics").json()["points"]
    assert [p["step"] for p in points] == list(range(1, 11))

    report(job, [{"seq": 0, "type": "started", "step": 10}, *progress(range(11, 14))], number=2)
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert '<strong data-testid="job-step">13</strong>' in html and "loss 7.7000" in html
    points = api_for(alice).get(f"/api/v1/jobs/{job.pk}/metrics").json()["points"]
    assert [p["step"] for p in points] == list(range(1, 14))


def test_console_times_on_the_job_and_instance_pages_carry_their_zone(
    client: Any, alice: Any, funded: Any, job: Any, ckpt: Path
) -> None:
    from instances.models import Checkpoint, InstanceTransition

    report(job, [save(ckpt, 10)])
    noon_utc = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)
    Checkpoint.objects.filter(job=job).update(created_at=noon_utc)
    InstanceTransition.objects.filter(instance=job.instance).update(created_at=noon_utc)
    client.force_login(alice)  # alice's zone: Asia/Shanghai (the default)

    job_page = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()
    instance_page = client.get(f"/o/{funded.slug}/instances/{job.instance_id}/").content.decode()

    assert "<td>2026-12-02 18:00:00 UTC+08:00</td>" in job_page
    assert "<td>2026-12-02 18:00:00 UTC+08:00</td>" in instance_page


def test_a_listed_checkpoint_whose_folder_lost_its_commit_marker_is_refused_before_a_publish(
    alice: Any, funded: Any, job: Any, ckpt: Path
) -> None:
    from portal.marketplace.models import App
    from portal.marketplace.services import MarketplaceError, app_publish_from_checkpoint

    report(job, [save(ckpt, 10), save(ckpt, 20)])
    (ckpt / "step-00000020" / ".metadata").unlink()
    cp = job.checkpoints.get(step=20)

    with pytest.raises(MarketplaceError) as refused:
        app_publish_from_checkpoint(organization=funded, user=alice, job_id=job.pk, checkpoint_id=cp.pk, name="x")

    assert str(refused.value) == "The checkpoint at step 20 is not complete. Checkpoints you can use: steps 10."
    assert listed(job) == [(20, False, False), (10, False, False)]
    assert job.checkpoints.get(step=20).complete is False
    assert App.objects.count() == 0


def test_two_rollbacks_at_once_the_second_is_refused_when_the_first_set_its_target_aside(
    alice: Any, job: Any, ckpt: Path, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any, monkeypatch
) -> None:
    """Two actors: rollback B (to step 20) passes its first check, then rollback A (to step 10) runs to the end
    before B takes the job's lock (forced by running A inside B's next step). B is refused — its target is now
    set aside — and the job resumes from A's step only: one stop, one new attempt from step 10."""
    from instances import checkpoints
    from instances.services import RollbackError, job_rollback

    report(job, [save(ckpt, 10), save(ckpt, 20)])
    ten, twenty = job.checkpoints.get(step=10), job.checkpoints.get(step=20)
    hold = checkpoints.checkpoint_hold_for_rollback
    ran: list[int] = []

    def the_other_rollback_first(cp: Any) -> None:
        if not ran:  # B, between its check and its lock: A rolls back to 10
            ran.append(cp.step)
            job_rollback(job=job, checkpoint_id=ten.pk, acting_user=alice)
        hold(cp)

    monkeypatch.setattr(checkpoints, "checkpoint_hold_for_rollback", the_other_rollback_first)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RollbackError) as refused:
        job_rollback(job=job, checkpoint_id=twenty.pk, acting_user=alice)
    assert (
        str(refused.value)
        == "The checkpoint at step 20 was set aside by a rollback. Checkpoints you can use: steps 10."
    )
    job.refresh_from_db()
    assert ran == [20]
    assert [(a.number, a.resume_from_step) for a in job.attempts.order_by("number")] == [(1, -1), (2, 10)]
    assert fake_backend.stopped == [job.attempts.get(number=1).handle]
    assert (job.resume_step, job.last_step) == (-1, 10)  # the resume to 10 was handed to attempt 2
    assert listed(job) == [(20, True, False), (10, False, False)]
