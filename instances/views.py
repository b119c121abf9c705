"""Console views of the instances app: launch forms with a live quote, instance and job lists with live
status, the job page (loss and throughput charts, checkpoints with roll back, logs tail) and confirmed
actions (stop, restart, roll back, checkpoint now).

One view serves a page and its htmx partial (``request.htmx and not request.htmx.boosted``). Every lookup goes
through ``portal.scoping`` (``request_organization``, ``scoped_get_or_404``): an outsider gets a 404 on every
route, actions included.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from billing.choices import PriceTier, RentalMode
from billing.pricing import PriceNotFound
from instances import checkpoints, joblogs, selectors, services
from instances.capacity import capacity_refusal
from instances.choices import InstanceKind
from instances.forms import IdleAutostopForm, InstanceLaunchForm, JobLaunchForm
from instances.interactive.idle import instance_activity_record, organization_idle_autostop_set
from instances.job_page import crash_report, format_duration, instance_cost, job_speed, job_summary, mfu_note_display
from instances.models import GpuType, Instance, TrainingJob
from instances.reasons import Reason
from instances.tiers import tier_and_idle_context, tier_prices
from portal.lib.charts import svg_line_chart
from portal.lib.htmx import is_partial
from portal.lib.http import AuthedHttpRequest
from portal.models import Organization
from portal.permissions import Action, authorize
from portal.scoping import request_organization, scoped_get_or_404


def _org(request: AuthedHttpRequest, slug: str) -> Organization:
    return request_organization(request, slug=slug)


def _job(request: AuthedHttpRequest, org: str, pk: int) -> tuple[Organization, TrainingJob]:
    organization = _org(request, org)
    qs = TrainingJob.objects.select_related("instance", "instance__gpu_type")
    return organization, scoped_get_or_404(qs, organization=organization, pk=pk)


def _instance(request: AuthedHttpRequest, org: str, pk: int) -> tuple[Organization, Instance]:
    organization = _org(request, org)
    qs = Instance.objects.select_related("gpu_type", "image")
    return organization, scoped_get_or_404(qs, organization=organization, pk=pk)


def _quote_context(organization: Organization, params: Any) -> dict[str, Any]:
    code = params.get("gpu_type") or ""
    try:
        count = int(params.get("gpu_count") or 1)
    except ValueError:
        count = 0
    mode = params.get("mode") or RentalMode.CONTAINER
    tier = params.get("tier") if params.get("tier") in PriceTier.values else PriceTier.ON_DEMAND
    ctx: dict[str, Any] = {"quote": None, "error": "", "tier": tier}
    if not GpuType.objects.filter(code=code, active=True).exists():
        ctx["error"] = _("Choose a GPU type.")
    elif not 1 <= count <= 1024:
        ctx["error"] = _("The GPU count must be between 1 and %(max)d.") % {"max": 1024}
    elif no_capacity := capacity_refusal(gpu_type=code, gpu_count=count, mode=mode):
        ctx["error"] = no_capacity
    else:
        try:
            ctx["quote"] = services.price_quote(
                organization=organization, gpu_type=code, gpu_count=count, mode=mode, tier=tier
            )
            ctx["tier_prices"] = tier_prices(gpu_type=code, gpu_count=count, mode=mode, selected=tier)
        except PriceNotFound:
            ctx["error"] = _("%(code)s has no price for this mode.") % {"code": code}
        else:
            ctx["starts_now"], ctx["queue"] = selectors.queue_estimate(
                organization=organization, gpu_type=code, gpu_count=count, mode=mode
            )
    return ctx


@login_required
def launch_quote(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The live price per hour, runway and queue estimate (htmx partial of the launch forms)."""
    organization = _org(request, org)
    return render(request, "instances/quote.html", {"org": organization, **_quote_context(organization, request.GET)})


# --- instances ----------------------------------------------------------------------------------------------
@login_required
def idle_autostop_settings(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The organization's default idle autostop for new interactive instances (owners and admins change it)."""
    organization = _org(request, org)
    form = IdleAutostopForm(request.POST or None, initial={"minutes": organization.idle_autostop_minutes})
    if request.method == "POST" and form.is_valid():
        organization_idle_autostop_set(
            organization=organization, minutes=form.cleaned_data["minutes"], acting_user=request.user
        )
        messages.success(request, _("Idle autostop default saved."))
        return redirect("idle_autostop_settings", org=organization.slug)
    ctx = {"org": organization, "form": form}
    return render(request, "instances/idle_settings.html", ctx, status=400 if form.errors else 200)


@login_required
@require_POST
def instance_keep_running(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """The idle warning's "keep it running": records activity (idle autostop starts counting again)."""
    organization, instance = _instance(request, org, pk)
    authorize(user=request.user, organization=organization, action=Action.INSTANCES_LAUNCH)
    instance_activity_record(instance=instance, acting_user=request.user)
    messages.success(request, _("%(name)s keeps running: the idle clock starts again.") % {"name": instance.name})
    return redirect("instance_detail", org=organization.slug, pk=instance.pk)


@login_required
def instance_list(request: AuthedHttpRequest, org: str) -> HttpResponse:
    organization = _org(request, org)
    ctx = {"org": organization, "instances": selectors.instances_for_org(organization)[:100]}
    return render(
        request, "instances/instance_table.html" if is_partial(request) else "instances/instance_list.html", ctx
    )


def _launch(request: AuthedHttpRequest, organization: Organization, form: Any) -> Instance | None:
    try:
        return services.instance_launch(organization=organization, user=request.user, spec=form.to_spec())
    except services.LaunchError as exc:
        field = {"dataset_version_ids": "datasets", "hyperparameters": None}.get(exc.field, exc.field)
        form.add_error(field if field in form.fields else None, str(exc))
        return None


@login_required
def instance_new(request: AuthedHttpRequest, org: str) -> HttpResponse:
    organization = _org(request, org)
    form = InstanceLaunchForm(request.POST or None, initial={"gpu_type": "cpu-local"})
    if request.method == "POST" and form.is_valid():
        instance = _launch(request, organization, form)
        if instance is not None:
            messages.success(request, _("Instance %(name)s launched.") % {"name": instance.name})
            return redirect("instance_detail", org=organization.slug, pk=instance.pk)
    ctx = {
        "org": organization,
        "form": form,
        "kind": "instance",
        **_quote_context(organization, form.data or {"gpu_type": form.initial.get("gpu_type"), "gpu_count": 1}),
    }
    return render(request, "instances/launch.html", ctx, status=400 if form.errors else 200)


@login_required
def instance_detail(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    organization, instance = _instance(request, org, pk)
    image, image_default = selectors.instance_image(instance)
    ctx = {
        "org": organization,
        "instance": instance,
        "transitions": instance.transitions.order_by("-id")[:50],
        "image": image,
        "image_default": image_default,
        "cost": instance_cost(instance),
        **tier_and_idle_context(instance),
    }
    template = "instances/instance_status.html" if is_partial(request) else "instances/instance_detail.html"
    return render(request, template, ctx)


@login_required
@require_http_methods(["GET", "POST"])
def instance_stop(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    organization, instance = _instance(request, org, pk)
    if request.method == "POST":
        services.instance_stop(
            instance=instance, reason=Reason("stopped_by_user", {"user": str(request.user)}), acting_user=request.user
        )
        interactive = instance.kind == InstanceKind.INTERACTIVE
        done = (
            _("Stopping %(name)s: its processes are ended; its disk (workspace folder and volumes) is kept.")
            if interactive
            else _("Stopping %(name)s: a final checkpoint is written first.")
        )
        messages.info(request, done % {"name": instance.name})
        return redirect("instance_detail", org=organization.slug, pk=instance.pk)
    return render(
        request,
        "instances/confirm.html",
        {
            "org": organization,
            "title": _("Stop %(name)s?") % {"name": instance.name},
            "text": (
                _(
                    "Its processes are ended (JupyterLab and SSH sessions close), then the instance stops and "
                    "billing ends. Its disk (workspace folder and volumes) is kept."
                )
                if instance.kind == InstanceKind.INTERACTIVE
                else _("Training jobs write a final checkpoint, then the instance stops and billing ends.")
            ),
            "button": _("Stop"),
            "cancel": request.META.get("HTTP_REFERER", ""),
        },
    )


# --- jobs ---------------------------------------------------------------------------------------------------
@login_required
def job_list(request: AuthedHttpRequest, org: str) -> HttpResponse:
    organization = _org(request, org)
    ctx = {"org": organization, "jobs": selectors.jobs_for_org(organization)[:100]}
    return render(request, "instances/job_table.html" if is_partial(request) else "instances/job_list.html", ctx)


@login_required
def job_new(request: AuthedHttpRequest, org: str) -> HttpResponse:
    organization = _org(request, org)
    form = JobLaunchForm(request.POST or None, organization=organization, initial={"gpu_type": "cpu-local"})
    if request.method == "POST" and form.is_valid():
        instance = _launch(request, organization, form)
        if instance is not None:
            messages.success(request, _("Job %(name)s launched.") % {"name": instance.name})
            return redirect("job_detail", org=organization.slug, pk=instance.job.pk)
    ctx = {
        "org": organization,
        "form": form,
        "kind": "job",
        **_quote_context(organization, form.data or {"gpu_type": form.initial.get("gpu_type"), "gpu_count": 1}),
    }
    return render(request, "instances/launch.html", ctx, status=400 if form.errors else 200)


@login_required
def job_detail(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    organization, job = _job(request, org, pk)
    curve = selectors.loss_curve(job)
    # the runtime's own MFU figure (or why there is none), from the newest progress event
    progress: dict[str, Any] = (
        job.events.filter(type="progress").order_by("-id").values_list("payload", flat=True).first() or {}
    )
    ctx = {
        "org": organization,
        "job": job,
        "instance": job.instance,
        "loss_chart": svg_line_chart([(p.step, p.loss) for p in curve], title=_("Loss")),
        "speed_chart": svg_line_chart(
            [(p.step, p.tokens_per_s) for p in curve], title=_("Tokens per second"), color="#1f8a4c"
        ),
        "checkpoints": selectors.checkpoints_of(job)[:50],
        "attempts": job.attempts.order_by("-number")[:20],
        "logs": joblogs.job_log(job=job, lines=60).lines,
        "last": curve[-1] if curve else None,
        "last_progress": progress or None,
        "mfu_note": mfu_note_display(progress),
        "crash": crash_report(job),
    }
    summary = job_summary(job)
    speed = job_speed(job)
    ctx.update(
        speed=speed,
        eta=format_duration(speed.eta) if speed.eta is not None else "",
        summary=summary,
        running_for=format_duration(summary.running),
        since_launch=format_duration(summary.since_launch),
    )
    return render(request, "instances/job_status.html" if is_partial(request) else "instances/job_detail.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def job_stop(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    organization, job = _job(request, org, pk)
    if request.method == "POST":
        services.instance_stop(
            instance=job.instance,
            reason=Reason("stopped_by_user", {"user": str(request.user)}),
            acting_user=request.user,
        )
        messages.info(request, _("Stopping %(name)s: a final checkpoint is written first.") % {"name": job.name})
        return redirect("job_detail", org=organization.slug, pk=job.pk)
    return render(
        request,
        "instances/confirm.html",
        {
            "org": organization,
            "title": _("Stop %(name)s?") % {"name": job.name},
            "text": _("The job writes a final checkpoint, then stops. You can restart it from there."),
            "button": _("Stop"),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def job_restart(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    organization, job = _job(request, org, pk)
    if request.method == "POST":
        try:
            services.job_restart(job=job, acting_user=request.user)
        except services.LaunchError as exc:  # a volume held by another instance now, or deleted
            messages.error(request, str(exc))
        else:
            messages.info(request, _("%(name)s restarts from its newest checkpoint.") % {"name": job.name})
        return redirect("job_detail", org=organization.slug, pk=job.pk)
    return render(
        request,
        "instances/confirm.html",
        {
            "org": organization,
            "title": _("Restart %(name)s?") % {"name": job.name},
            "text": _("A running job is checkpointed and stopped first; it then resumes from its newest checkpoint."),
            "button": _("Restart"),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def job_rollback(request: AuthedHttpRequest, org: str, pk: int, checkpoint: int) -> HttpResponse:
    organization, job = _job(request, org, pk)
    cp = scoped_get_or_404(
        job.checkpoints.all(), organization=organization, org_field="job__organization", pk=checkpoint
    )
    if request.method == "POST":
        try:
            services.job_rollback(job=job, checkpoint_id=cp.pk, acting_user=request.user)
        except (services.RollbackError, services.LaunchError) as exc:
            messages.error(request, str(exc))
        else:
            messages.info(request, _("%(name)s rolls back to step %(step)d.") % {"name": job.name, "step": cp.step})
        return redirect("job_detail", org=organization.slug, pk=job.pk)
    return render(
        request,
        "instances/confirm.html",
        {
            "org": organization,
            "title": _("Roll back to step %(step)d?") % {"step": cp.step},
            "text": _("The job restarts from this checkpoint; later checkpoints are set aside."),
            "button": _("Roll back"),
        },
    )


@login_required
@require_POST
def job_checkpoint_now(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    organization, job = _job(request, org, pk)
    try:
        services.job_checkpoint_now(job=job, acting_user=request.user)
    except services.NotRunning as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, _("Checkpoint requested: the job saves after its current step."))
    return redirect("job_detail", org=organization.slug, pk=job.pk)


def _int_param(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return -1  # never a rank or an attempt: answered as unknown


@login_required
def job_logs(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """One node rank's log (``?rank=``, default 0) of the newest attempt or ``?attempt=``; an unknown rank
    or attempt is a 404 page that says which exist."""
    organization, job = _job(request, org, pk)
    rank = _int_param(request.GET.get("rank")) or 0
    attempt = _int_param(request.GET.get("attempt"))
    ctx: dict[str, Any] = {
        "org": organization,
        "job": job,
        "attempts": list(job.attempts.exclude(handle="").order_by("-number").values_list("number", flat=True)),
    }
    try:
        found = joblogs.job_log(job=job, rank=rank, attempt_number=attempt, lines=400)
    except joblogs.UnknownRank as exc:
        ctx.update(error=str(exc), logs=[], ranks=[], rank=rank, attempt=attempt)
        return render(request, "instances/job_logs.html", ctx, status=404)
    ctx.update(
        logs=found.lines, ranks=list(range(found.ranks)), rank=found.rank, attempt=found.attempt, source=found.source
    )
    return render(request, "instances/job_logs.html", ctx)


@login_required
@require_POST
def job_checkpoint_pin(request: AuthedHttpRequest, org: str, pk: int, checkpoint: int) -> HttpResponse:
    """Pin (``pinned=1``) or unpin a checkpoint of the job; a checkpoint of another job or organization is
    a 404."""
    organization, job = _job(request, org, pk)
    pinned = request.POST.get("pinned", "1") == "1"
    try:
        cp = checkpoints.checkpoint_pin(job=job, checkpoint_id=checkpoint, pinned=pinned, acting_user=request.user)  # type: ignore[arg-type]
    except checkpoints.CheckpointUnavailable as exc:
        if exc.not_found:
            raise Http404(str(exc)) from None
        messages.error(request, str(exc))
    else:
        messages.info(
            request,
            (
                _("Checkpoint at step %(step)d pinned: it is never deleted.")
                if pinned
                else _("Checkpoint at step %(step)d unpinned.")
            )
            % {"step": cp.step},
        )
    return redirect("job_detail", org=organization.slug, pk=job.pk)
