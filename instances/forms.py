"""Console forms: launch a training job or an interactive instance."""

from __future__ import annotations

import shlex
import uuid
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from billing.choices import PriceTier, RentalMode
from instances.choices import Engine, InstanceKind, ModelPreset
from instances.interactive.idle import MAX_IDLE_AUTOSTOP_MINUTES
from instances.launch_defaults import CPU_DEFAULTS, GPU_DEFAULTS, LaunchDefaults, is_cpu_type, launch_defaults
from instances.limits import HYPERPARAMETER_LIMITS, LAUNCH_LIMITS, Bound
from instances.models import GpuType, Image
from instances.services import LaunchSpec
from portal.models import Organization


def _bounded(label: Any, bound: Bound, *, initial: Any, **overrides: Any) -> forms.Field:
    """A form field for one entry of the bounds table (``instances.limits``), the API's bounds."""
    low, high = overrides.get("min_value", bound.low), overrides.get("max_value", bound.high)
    if bound.kind is int:
        return forms.IntegerField(label=label, initial=initial, min_value=int(low), max_value=int(high))
    return forms.FloatField(label=label, initial=initial, min_value=low, max_value=high)


class GpuTypeSelect(forms.Select):
    """A select whose options for GPU types without capacity are disabled and say why
    (``unavailable``: code -> reason, from ``instances.capacity``)."""

    unavailable: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unavailable = {}

    def create_option(self, name: str, value: Any, label: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(name, value, label, *args, **kwargs)
        reason = self.unavailable.get(str(value))
        if reason:
            option["attrs"]["disabled"] = True
            option["label"] = _("%(type)s — unavailable: %(reason)s") % {"type": label, "reason": reason}
        return option


class _CapacityForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100, required=False)
    gpu_type = forms.ModelChoiceField(
        label=_("GPU type"),
        queryset=GpuType.objects.filter(active=True),
        to_field_name="code",
        empty_label=None,
        widget=GpuTypeSelect,
    )
    gpu_count = _bounded(_("GPUs"), LAUNCH_LIMITS["gpu_count"], initial=1)
    mode = forms.ChoiceField(label=_("Mode"), choices=RentalMode.choices, initial=RentalMode.CONTAINER)
    tier = forms.ChoiceField(
        label=_("Tier"),
        choices=PriceTier.choices,
        initial=PriceTier.ON_DEMAND,
        required=False,  # absent = on demand
        help_text=_(
            "Interruptible: cheaper, but an on-demand request may take the capacity back (a training job "
            "checkpoints and resumes exactly; an interactive instance keeps its disk, not its processes)."
        ),
    )
    image = forms.ModelChoiceField(
        label=_("Image"),
        queryset=Image.objects.all(),
        to_field_name="name",
        required=False,
        empty_label=_("Default image (the platform's PyTorch image)"),
        help_text=_("The container image the work runs in, with its PyTorch, CUDA and DeepSpeed versions."),
    )

    volumes = forms.CharField(
        label=_("Volumes"),
        max_length=400,
        required=False,
        help_text=_("Names of your volumes to attach read-write, separated by commas (see Volumes)."),
    )
    # One key per rendered form: a double-clicked or re-sent submit launches once (the service returns the
    # first launch for a key it has seen: ``LaunchSpec.idempotency_key``).
    submit_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["submit_key"].initial = uuid.uuid4().hex
        from instances.capacity import capacity_by_type

        capacity = capacity_by_type()
        self.unavailable = {code: c.reason for code, c in capacity.items() if not c.available}
        self.fields["gpu_type"].widget.unavailable = self.unavailable  # type: ignore[attr-defined]
        # start on the page's GPU type if it has capacity, else on the first one that has
        if str(self.initial.get("gpu_type") or "") in self.unavailable:
            ready = [code for code in sorted(capacity) if code not in self.unavailable]
            if ready:
                self.initial["gpu_type"] = ready[0]

    def spec_fields(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "volumes": [n.strip() for n in (d.get("volumes") or "").split(",") if n.strip()],
            "name": d.get("name") or "",
            "gpu_type": d["gpu_type"].code,
            "gpu_count": d["gpu_count"],
            "mode": d["mode"],
            "tier": d.get("tier") or PriceTier.ON_DEMAND,
            "image": d["image"].name if d.get("image") else "",
            "idempotency_key": f"console:{d['submit_key']}" if d.get("submit_key") else "",
        }


class JobLaunchForm(_CapacityForm):
    """A training job: capacity, datasets (versions the organization may mount), model, engine and
    hyperparameters; initial values are the launch defaults of the GPU type the page starts on
    (``instances.launch_defaults``)."""

    datasets = forms.TypedMultipleChoiceField(
        label=_("Datasets"), coerce=int, choices=(), widget=forms.CheckboxSelectMultiple
    )
    model_preset = forms.ChoiceField(label=_("Model"), choices=ModelPreset.choices, initial=ModelPreset.TINY)
    engine = forms.ChoiceField(label=_("Engine"), choices=Engine.choices, initial=Engine.FSDP)
    seq_len = _bounded(_("Sequence length"), HYPERPARAMETER_LIMITS["seq_len"], initial=None)
    micro_batch = _bounded(_("Micro-batch"), HYPERPARAMETER_LIMITS["micro_batch"], initial=None)
    grad_accum = _bounded(_("Gradient accumulation"), HYPERPARAMETER_LIMITS["grad_accum"], initial=None)
    max_steps = _bounded(_("Steps"), HYPERPARAMETER_LIMITS["max_steps"], initial=None, min_value=1)
    lr = _bounded(_("Learning rate"), HYPERPARAMETER_LIMITS["lr"], initial=None)
    checkpoint_every_minutes = _bounded(
        _("Checkpoint every (minutes)"), LAUNCH_LIMITS["checkpoint_every_minutes"], initial=None
    )
    checkpoint_every_steps = _bounded(
        _("Checkpoint every (steps, 0 = off)"), LAUNCH_LIMITS["checkpoint_every_steps"], initial=None
    )
    keep_last = _bounded(_("Keep last checkpoints"), LAUNCH_LIMITS["keep_last"], initial=None)
    elastic_min_gpus = forms.IntegerField(
        label=_("Resume on at least (GPUs, 0 = only on the full count)"),
        min_value=0,
        max_value=int(LAUNCH_LIMITS["elastic_min_gpus"].high),
        initial=0,
        required=False,
        help_text=_(
            "After a preemption the job may resume on fewer GPUs, down to this many; the global batch and the "
            "order of samples stay the same."
        ),
    )

    def __init__(self, *args: Any, organization: Organization, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the initial values are the defaults of the GPU type the page starts on (a CPU slot's are small)
        defaults = launch_defaults(gpu_type=str(self.initial.get("gpu_type") or ""))
        for name, value in self._field_defaults(defaults).items():
            self.fields[name].initial = value
        from datasets.selectors import versions_mountable_by

        self.fields["datasets"].choices = [  # type: ignore[attr-defined]
            (v.pk, f"{v.dataset.name} v{v.number}") for v in versions_mountable_by(organization)
        ]

    @staticmethod
    def _field_defaults(d: LaunchDefaults) -> dict[str, Any]:
        """The form's fields that take the launch defaults, with ``d``'s values."""
        hyper = ("seq_len", "micro_batch", "grad_accum", "max_steps", "lr")
        checkpoints = ("checkpoint_every_minutes", "checkpoint_every_steps", "keep_last")
        return {**{n: d.hyperparameters[n] for n in hyper}, **{n: getattr(d, n) for n in checkpoints}}

    def defaults_by_type(self) -> dict[str, Any]:
        """``{"current": code, "types": {code: {field: default}}}`` for every GPU type the form offers, for
        the page's script (``portal/static/portal/app.js``): switching the GPU type moves the fields that
        still hold the old type's defaults to the new type's (a CPU slot's are small, a GPU's large)."""
        types = {}
        for gpu_type in self.fields["gpu_type"].queryset:  # type: ignore[attr-defined]
            types[gpu_type.code] = self._field_defaults(CPU_DEFAULTS if is_cpu_type(gpu_type) else GPU_DEFAULTS)
        current = self.data.get("gpu_type") if self.is_bound else self.initial.get("gpu_type")
        return {"current": str(current or ""), "types": types}

    def to_spec(self) -> LaunchSpec:
        d = self.cleaned_data
        return LaunchSpec(
            kind=InstanceKind.TRAINING,
            **self.spec_fields(),
            dataset_version_ids=list(d["datasets"]),
            model_preset=d["model_preset"],
            engine=d["engine"],
            hyperparameters={k: d[k] for k in ("seq_len", "micro_batch", "grad_accum", "max_steps", "lr")},
            checkpoint_every_minutes=d["checkpoint_every_minutes"],
            checkpoint_every_steps=d["checkpoint_every_steps"],
            keep_last=d["keep_last"],
            elastic_min_gpus=d.get("elastic_min_gpus") or 0,
        )


class InstanceLaunchForm(_CapacityForm):
    """An interactive instance: JupyterLab and SSH, and the user's own command in the image if one is given."""

    command = forms.CharField(
        label=_("Command (optional)"),
        max_length=2000,
        required=False,
        help_text=_(
            "Run in the image, e.g. python train.py --epochs 3. Leave it empty to work in JupyterLab and over SSH: "
            "the instance runs until you stop it or idle autostop does."
        ),
    )
    idle_autostop_minutes = forms.IntegerField(
        label=_("Idle autostop (minutes)"),
        min_value=0,
        max_value=MAX_IDLE_AUTOSTOP_MINUTES,
        required=False,
        help_text=_(
            "Stop after this many minutes without activity: no JupyterLab or SSH use, no busy kernel, open "
            "terminal or SSH session, no computing processes (warned first; the disk is kept). 0 = off; empty = "
            "your organization's default."
        ),
    )

    def clean_command(self) -> list[str]:
        """The command as an argv (shell quoting rules, no shell); ``[]`` when left empty (no command)."""
        try:
            return shlex.split(self.cleaned_data.get("command") or "")
        except ValueError as exc:
            raise forms.ValidationError(_("The command cannot be parsed: %(err)s") % {"err": exc}) from None

    def to_spec(self) -> LaunchSpec:
        return LaunchSpec(
            kind=InstanceKind.INTERACTIVE,
            **self.spec_fields(),
            command=self.cleaned_data["command"],
            idle_autostop_minutes=self.cleaned_data.get("idle_autostop_minutes"),
        )


class IdleAutostopForm(forms.Form):
    """The organization's default idle autostop (minutes; empty or 0 = off)."""

    minutes = forms.IntegerField(
        label=_("Idle autostop for new interactive instances (minutes)"),
        min_value=0,
        max_value=MAX_IDLE_AUTOSTOP_MINUTES,
        required=False,
        help_text=_("Stopped after this many minutes without activity, warned first. Empty or 0 = off."),
    )
