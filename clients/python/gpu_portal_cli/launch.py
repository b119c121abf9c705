"""What the launch commands send (``instances launch``, ``jobs launch``): every field the API takes for a launch,
built from the command line, and the options the two commands share."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpu_portal_client.models import TierEnum

from gpu_portal_cli.api import CliError


def add_tier_and_volumes(p: argparse.ArgumentParser) -> None:
    """``--tier`` and ``--volume`` of both launch commands."""
    p.add_argument(
        "--tier",
        default=TierEnum.ON_DEMAND.value,
        choices=[t.value for t in TierEnum],
        help="price tier: on_demand (default) or interruptible (discounted, may be preempted and resumed)",
    )
    p.add_argument(
        "--volume",
        action="append",
        metavar="NAME",
        help="attach your organization's volume NAME read-write (repeat for several)",
    )


def load_json_arg(text: str, name: str) -> Any:
    """A JSON argument: inline, ``@file`` or ``-`` (stdin)."""
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise CliError(f"{name}: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{name} is not JSON: {exc}") from None


def parse_value(text: str) -> Any:
    """``--hp key=value`` values: JSON where they parse (``32``, ``1e-3``, ``true``), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def instance_launch_body(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /instances`` body of ``instances launch``: every field the API takes (``InstanceLaunchRequest``);
    ``idle_autostop_minutes`` only when ``--idle-minutes`` is given (else the organization's default)."""
    body: dict[str, Any] = {
        "name": args.name,
        "gpu_type": args.gpu_type,
        "gpu_count": args.gpu_count,
        "mode": args.mode,
        "image": args.image,
        "command": args.command,
        "volumes": args.volume or [],
        "tier": args.tier,
    }
    if args.idle_minutes is not None:
        body["idle_autostop_minutes"] = args.idle_minutes
    return body


def job_launch_body(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /jobs`` body of ``jobs launch``: every field the API takes (``JobLaunchRequest``); the
    checkpoint intervals only when given (else the GPU type's defaults)."""
    hyper: dict[str, Any] = {}
    if args.hyperparameters:
        hyper = load_json_arg(args.hyperparameters, "--hyperparameters")
        if not isinstance(hyper, dict):
            raise CliError("--hyperparameters must be a JSON object")
    for item in args.hp or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--hp {item!r}: expected KEY=VALUE")
        hyper[key.strip()] = parse_value(value)
    spec: dict[str, Any] = {
        "name": args.name,
        "gpu_type": args.gpu_type,
        "gpu_count": args.gpu_count,
        "mode": args.mode,
        "image": args.image,
        "dataset_version_ids": args.dataset,
        "model_preset": args.preset,
        "engine": args.engine,
        "hyperparameters": hyper,
        "keep_last": args.keep_last,
        "elastic_min_gpus": args.elastic_min_gpus,
        "volumes": args.volume or [],
        "tier": args.tier,
    }
    if args.checkpoint_every_minutes is not None:
        spec["checkpoint_every_minutes"] = args.checkpoint_every_minutes
    if args.checkpoint_every_steps is not None:
        spec["checkpoint_every_steps"] = args.checkpoint_every_steps
    return spec
