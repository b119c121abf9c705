"""``gpu-portal``: the portal's partner API from a terminal, on the generated client (``gpu_portal_client``).

Every command prints a table (or a short summary) by default and the API's JSON with ``--json``. Waits
(``instances launch``, ``jobs launch``, ``--wait``) show a status line on stderr. An API refusal prints the
error envelope's message, code and details on stderr and exits 1; so do "not logged in" and an unreachable
portal. Exit codes: 0 done, 1 refused or failed, 2 bad command line (argparse), 130 interrupted."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from gpu_portal_client.api.apps import apps_invoke_create, apps_list
from gpu_portal_client.api.datasets import datasets_agreements_create, datasets_list, datasets_retrieve
from gpu_portal_client.api.instances import instances_create, instances_list, instances_retrieve, instances_stop_create
from gpu_portal_client.api.jobs import (
    jobs_checkpoints_list,
    jobs_create,
    jobs_list,
    jobs_logs_retrieve,
    jobs_retrieve,
    jobs_rollback_create,
    jobs_stop_create,
)
from gpu_portal_client.api.me import me_retrieve
from gpu_portal_client.api.wallet import wallet_retrieve
from gpu_portal_client.models import (
    AgreementCreateRequest,
    AppsInvokeCreateBody,
    DatasetsListDomain,
    InstanceLaunchRequest,
    JobLaunchRequest,
    RollbackRequest,
)

from gpu_portal_cli import config
from gpu_portal_cli.api import TERMINAL, Api, CliError, api_from, wait_for, wait_until_stopped
from gpu_portal_cli.launch import add_tier_and_volumes, instance_launch_body, job_launch_body, load_json_arg
from gpu_portal_cli.output import CHECKPOINT_COLUMNS, cell, cny, emit_json, table

LOG_WINDOW = 2000  # lines asked for per poll of ``jobs logs --follow`` (the API's maximum)


def cmd_login(args: argparse.Namespace) -> None:
    url = args.url or os.environ.get(config.URL_ENV) or config.read_file().get("url")
    if not url:
        url = input("Portal URL (e.g. https://portal.example.com): ").strip()
    token = args.token or os.environ.get(config.TOKEN_ENV)
    if not token:
        token = (
            getpass.getpass("API token (create one in the console under API tokens): ")
            if sys.stdin.isatty()
            else sys.stdin.readline()
        )
    token = (token or "").strip()
    if not url or not token:
        raise CliError("login needs a URL and a token")
    credentials = config.Credentials(url=config.normalize_url(url), token=token)
    me = Api(credentials)(me_retrieve)  # refuse to save a token the portal does not accept
    path = config.save(credentials)
    if args.json:
        emit_json({"url": credentials.url, "config": str(path), "me": me})
        return
    print(
        f"Logged in to {credentials.url} as {me['email']} (organization {cell(me.get('token_organization'))}, "
        f"scope {cell(me.get('token_scope'))}). Saved to {path}."
    )


def cmd_logout(args: argparse.Namespace) -> None:
    forgot = config.forget()
    if args.json:
        return emit_json({"logged_out": forgot})
    print("Logged out." if forgot else "Not logged in.")


def cmd_whoami(args: argparse.Namespace) -> None:
    me = api_from(args)(me_retrieve)
    if args.json:
        return emit_json(me)
    print(
        f"{me['email']} ({me.get('name') or '-'}), token organization {cell(me.get('token_organization'))}, "
        f"scope {cell(me.get('token_scope'))}"
    )
    table(
        me.get("memberships", []), [("organization", "organization"), ("name", "organization_name"), ("role", "role")]
    )


INSTANCE_COLUMNS = [
    ("id", "id"),
    ("name", "name"),
    ("kind", "kind"),
    ("status", "status"),
    ("gpu", "gpu_type"),
    ("count", "gpu_count"),
    ("job", "job"),
    ("created", "created_at"),
]
JOB_COLUMNS = [
    ("id", "id"),
    ("name", "name"),
    ("status", "status"),
    ("outcome", "outcome"),
    ("gpu", "gpu_type"),
    ("count", "gpu_count"),
    ("preset", "model_preset"),
    ("step", "last_step"),
    ("created", "created_at"),
]


def cmd_instances_list(args: argparse.Namespace) -> None:
    rows = list(api_from(args).pages(instances_list, limit=args.limit))
    return emit_json(rows) if args.json else table(rows, INSTANCE_COLUMNS)


def cmd_instances_launch(args: argparse.Namespace) -> None:
    api = api_from(args)
    try:
        body = InstanceLaunchRequest.from_dict(instance_launch_body(args))
    except ValueError as exc:  # an enum value the schema does not list
        raise CliError(str(exc)) from None
    extra = {"idempotency_key": args.idempotency_key} if args.idempotency_key else {}
    inst = api(instances_create, body=body, **extra)
    if not args.json:
        print(f"Instance {inst['id']} launched ({inst['gpu_count']} × {inst['gpu_type']}).", file=sys.stderr)
    if not args.no_wait:
        inst = wait_for(
            lambda: api(instances_retrieve, inst["id"]),
            what=f"instance {inst['id']}",
            timeout_s=args.timeout,
            interval_s=args.interval,
        )
    return emit_json(inst) if args.json else table([inst], INSTANCE_COLUMNS)


def cmd_instances_stop(args: argparse.Namespace) -> None:
    api = api_from(args)
    inst = api(instances_stop_create, args.id)
    if args.wait:
        inst = wait_until_stopped(
            lambda: api(instances_retrieve, args.id),
            what=f"instance {args.id}",
            timeout_s=args.timeout,
            interval_s=args.interval,
        )
    return emit_json(inst) if args.json else table([inst], INSTANCE_COLUMNS)


def cmd_jobs_list(args: argparse.Namespace) -> None:
    rows = list(api_from(args).pages(jobs_list, limit=args.limit))
    return emit_json(rows) if args.json else table(rows, JOB_COLUMNS)


def cmd_jobs_launch(args: argparse.Namespace) -> None:
    api = api_from(args)
    spec = job_launch_body(args)
    try:
        body = JobLaunchRequest.from_dict(spec)
    except ValueError as exc:  # an enum value the schema does not list
        raise CliError(str(exc)) from None
    extra = {"idempotency_key": args.idempotency_key} if args.idempotency_key else {}
    job = api(jobs_create, body=body, **extra)
    if not args.json:
        print(
            f"Job {job['id']} launched on instance {job['instance']} ({job['gpu_count']} × {job['gpu_type']}).",
            file=sys.stderr,
        )
    if not args.no_wait:
        job = wait_for(
            lambda: api(jobs_retrieve, job["id"]),
            what=f"job {job['id']}",
            timeout_s=args.timeout,
            interval_s=args.interval,
        )
    return emit_json(job) if args.json else table([job], JOB_COLUMNS)


def cmd_jobs_stop(args: argparse.Namespace) -> None:
    api = api_from(args)
    job = api(jobs_stop_create, args.id)
    if args.wait:
        job = wait_until_stopped(
            lambda: api(jobs_retrieve, args.id), what=f"job {args.id}", timeout_s=args.timeout, interval_s=args.interval
        )
    return emit_json(job) if args.json else table([job], JOB_COLUMNS)


def _dropped_notice(dropped: int | None, attempt: int | None) -> str:
    """The marker printed (stderr) where a follower's lines are missing: the portal's copy moved past the
    cursor (``dropped`` lines, counted), or the cluster rotated the log (``None``: a number not known)."""
    if dropped is None:
        return f"gpu-portal: lines of attempt {attempt} may be missing here: the cluster rotated or restarted its log"
    lines = f"{dropped} line{'s' if dropped != 1 else ''}"
    return f"gpu-portal: {lines} of attempt {attempt} dropped here: the portal no longer has them"


def cmd_jobs_logs(args: argparse.Namespace) -> None:
    """Print the job's log; with ``--follow``, keep printing by the API's cursor (an offset into the
    attempt's log, never by comparing lines: repeated lines are all printed, a burst larger than one answer
    is read in as many answers as it takes) until the job has ended, then through the attempts that
    followed. Where the portal no longer has lines the cursor points at, a marker on stderr says how many."""
    api = api_from(args)
    if not args.follow:
        logs = api(jobs_logs_retrieve, args.id, lines=args.lines)
        if args.json:
            return emit_json(logs)
        for line in logs.get("lines", []):
            print(line)
        return
    attempt: int | None = None  # the attempt followed, and the offset reached in its log
    cursor: int | None = None
    while True:
        job_status = api(jobs_retrieve, args.id).get("status")
        ended = job_status in TERMINAL  # read before the log: nothing written before it ended is missed
        while True:
            query: dict[str, Any] = {"lines": args.lines if cursor is None else LOG_WINDOW}
            if attempt is not None:
                query["attempt"] = attempt
            if cursor is not None:
                query["after"] = cursor
            logs = api(jobs_logs_retrieve, args.id, **query)
            if logs.get("attempt") is None:  # nothing submitted yet: read its first attempt from the start
                cursor = 0
                break
            attempt = logs["attempt"]
            if logs.get("dropped") != 0 and cursor is not None:
                dropped = logs.get("dropped")
                if args.json:
                    print(json.dumps({"attempt": attempt, "dropped": dropped}), flush=True)
                else:
                    print(_dropped_notice(dropped, attempt), file=sys.stderr, flush=True)
            for line in logs.get("lines", []):
                print(json.dumps({"line": line}, ensure_ascii=False) if args.json else line, flush=True)
            cursor = logs["cursor"]
            if logs.get("more"):
                continue
            if logs.get("next_attempt") is not None:  # this attempt has ended (resumed, restarted): the next
                attempt, cursor = logs["next_attempt"], 0
                if args.json:
                    print(json.dumps({"attempt": attempt}), flush=True)
                else:
                    print(f"gpu-portal: attempt {attempt}", file=sys.stderr, flush=True)
                continue
            break
        if ended:
            return
        time.sleep(args.interval)


def cmd_jobs_checkpoints(args: argparse.Namespace) -> None:
    rows = api_from(args)(jobs_checkpoints_list, args.id)
    return emit_json(rows) if args.json else table(rows, CHECKPOINT_COLUMNS)


def cmd_jobs_rollback(args: argparse.Namespace) -> None:
    api = api_from(args)
    checkpoints = api(jobs_checkpoints_list, args.id)
    usable = [c for c in checkpoints if c.get("complete") and not c.get("rolled_back") and not c.get("deleted_at")]
    matches = [c for c in usable if c["step"] == args.step]
    if not matches:  # nothing sent: the portal would refuse it too (set aside, deleted or never written)
        steps = sorted({c["step"] for c in usable})
        raise CliError(
            f"job {args.id} has no checkpoint at step {args.step} to roll back to (checkpoints you can use: "
            f"steps {', '.join(map(str, steps)) or 'none'})"
        )
    checkpoint = max(matches, key=lambda c: c["id"])
    job = api(jobs_rollback_create, args.id, body=RollbackRequest(checkpoint=checkpoint["id"]))
    if args.json:
        return emit_json(job)
    print(f"Job {args.id} rolls back to step {args.step} (checkpoint {checkpoint['id']}).")
    table([job], JOB_COLUMNS)


DATASET_COLUMNS = [
    ("id", "id"),
    ("slug", "slug"),
    ("name", "name"),
    ("domain", "domain"),
    ("version", "latest_version.number"),
    ("tokens", "latest_version.tokens"),
    ("license", "latest_version.license_version.license"),
    ("fee", "latest_version.license_version.price_micros", lambda m: cny(m)),
]


def cmd_datasets_list(args: argparse.Namespace) -> None:
    filters: dict[str, Any] = {}
    if args.domain:
        filters["domain"] = DatasetsListDomain(args.domain)
    if args.q:
        filters["q"] = args.q
    rows = list(api_from(args).pages(datasets_list, limit=args.limit, **filters))
    return emit_json(rows) if args.json else table(rows, DATASET_COLUMNS)


def cmd_datasets_accept(args: argparse.Namespace) -> None:
    api = api_from(args)
    dataset = api(datasets_retrieve, args.id)
    version = dataset.get("latest_version") or {}
    lv = version.get("license_version")
    if not lv:
        raise CliError(f"dataset {args.id} has no version to accept a license for yet")
    terms = ", ".join(
        f"{name}: {'yes' if lv.get(key) else 'no'}"
        for name, key in (
            ("commercial use", "commercial_use"),
            ("redistribution", "redistribution"),
            ("derivative models", "derivative_models"),
        )
    )
    summary = [
        f"Dataset {dataset['id']} {dataset['name']} (version {version.get('number')})",
        f"License {lv.get('license_name')} version {lv.get('number')}: {terms}; fee {cny(lv.get('price_micros'))}",
        f"License text SHA-256 {lv.get('text_sha256')}; read it at {api.url}/datasets/{dataset['id']}/",
    ]
    if not args.yes:
        print("\n".join(summary), file=sys.stderr)
        if not sys.stdin.isatty():
            raise CliError("accepting a license needs --yes when not run interactively")
        if input("Accept this license for your organization? [y/N] ").strip().lower() not in ("y", "yes"):
            raise CliError("not accepted")
    body = AgreementCreateRequest(text_sha256=lv["text_sha256"], license_version=lv["id"])
    agreement = api(datasets_agreements_create, args.id, body=body)
    if args.json:
        return emit_json(agreement)
    print(
        f"Accepted {lv.get('license_name')} version {lv.get('number')} for dataset {dataset['id']} "
        f"(agreement {agreement.get('id')})."
    )


def cmd_wallet(args: argparse.Namespace) -> None:
    wallet = api_from(args)(wallet_retrieve)
    if args.json:
        return emit_json(wallet)
    cur = wallet.get("currency", "CNY")
    print(f"Organization   {wallet['organization']}")
    print(f"Balance        {wallet['balance']} {cur}  (trial {wallet['trial_balance']}, paid {wallet['paid_balance']})")
    if wallet.get("trial_expires_at"):
        print(f"Trial expires  {cell(wallet['trial_expires_at'])}")
    print()
    table(
        wallet.get("grants", []),
        [
            ("grant", "id"),
            ("kind", "kind"),
            ("amount", "amount"),
            ("remaining", "remaining"),
            ("granted", "granted_at"),
            ("expires", "expires_at"),
        ],
        empty="(no credit grants)",
    )


def cmd_apps_list(args: argparse.Namespace) -> None:
    rows = list(api_from(args).pages(apps_list, limit=args.limit))
    return (
        emit_json(rows)
        if args.json
        else table(
            rows,
            [
                ("slug", "slug"),
                ("name", "name"),
                ("category", "category"),
                ("per call", "price_per_call"),
                ("per 1k tokens", "price_per_1k_tokens"),
                ("visibility", "visibility"),
            ],
        )
    )


def cmd_apps_invoke(args: argparse.Namespace) -> None:
    payload = load_json_arg(args.input, "--input")
    if not isinstance(payload, dict):
        raise CliError("--input must be a JSON object")
    extra = {"idempotency_key": args.idempotency_key} if args.idempotency_key else {}
    result = api_from(args)(apps_invoke_create, args.slug, body=AppsInvokeCreateBody.from_dict(payload), **extra)
    if args.json:
        return emit_json(result)
    emit_json(result.get("output"))
    replay = ", replayed" if result.get("replayed") else ""
    print(
        f"call {result.get('call_id')}: {result.get('cost')} CNY, {result.get('latency_ms')} ms{replay}",
        file=sys.stderr,
    )


# --- command line ------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-portal",
        description="The gpu-portal partner API from a terminal.",
        epilog="Log in first: gpu-portal login --url https://portal.example.com",
    )
    parser.add_argument("--json", action="store_true", help="print the API's JSON instead of tables")
    parser.add_argument("--url", help=f"portal URL (default: ${config.URL_ENV}, then the saved login)")
    parser.add_argument("-o", "--organization", help="organization slug to act for (default: the token's)")
    # every leaf command also takes the global options after its name (`gpu-portal login --url …`)
    leaf = argparse.ArgumentParser(add_help=False)
    leaf.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON output")
    leaf.add_argument("--url", default=argparse.SUPPRESS, help="portal URL (as before the command)")
    leaf.add_argument(
        "-o", "--organization", default=argparse.SUPPRESS, help="organization slug to act for (as before the command)"
    )
    waits = argparse.ArgumentParser(add_help=False)
    waits.add_argument("--timeout", type=float, default=1800, help="seconds to wait (default 1800)")
    waits.add_argument("--interval", type=float, default=1.0, help="seconds between polls (default 1)")
    listing = argparse.ArgumentParser(add_help=False)
    listing.add_argument("--limit", type=int, default=100, help="at most this many rows (default 100)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("login", parents=[leaf], help="save the portal URL and an API token (checked first)")
    p.add_argument("--token", help=f"API token (default: ${config.TOKEN_ENV}, else asked for / read from stdin)")
    p.set_defaults(func=cmd_login)
    sub.add_parser("logout", parents=[leaf], help="forget the saved login").set_defaults(func=cmd_logout)
    sub.add_parser("whoami", parents=[leaf], help="the token's user and organizations").set_defaults(func=cmd_whoami)

    inst = sub.add_parser("instances", help="GPU instances").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    inst.add_parser("list", parents=[leaf, listing], help="your organization's instances").set_defaults(
        func=cmd_instances_list
    )
    p = inst.add_parser("launch", parents=[leaf, waits], help="launch an interactive instance and wait until running")
    p.add_argument("--gpu-type", required=True, help="e.g. A100-80G-SXM, cpu-local")
    p.add_argument("--gpu-count", type=int, default=1)
    p.add_argument("--mode", default="container", choices=["container", "bare_metal"])
    p.add_argument("--image", default="")
    p.add_argument("--name", default="")
    p.add_argument(
        "--idle-minutes",
        type=int,
        metavar="N",
        help="stop after N minutes without activity, warned first (0 = never; default: the organization's)",
    )
    add_tier_and_volumes(p)
    p.add_argument("--idempotency-key", help="a retried launch with the same key returns the first instance")
    p.add_argument("--no-wait", action="store_true", help="return once launched, do not wait for running")
    p.add_argument(
        "command", nargs="*", help="the command to run (after --); none: JupyterLab and SSH keep the instance running"
    )
    p.set_defaults(func=cmd_instances_launch)
    p = inst.add_parser("stop", parents=[leaf, waits], help="stop an instance")
    p.add_argument("id", type=int)
    p.add_argument("--wait", action="store_true", help="wait until it has stopped")
    p.set_defaults(func=cmd_instances_stop)

    jobs = sub.add_parser("jobs", help="training jobs").add_subparsers(dest="action", required=True, metavar="ACTION")
    jobs.add_parser("list", parents=[leaf, listing], help="your organization's jobs").set_defaults(func=cmd_jobs_list)
    p = jobs.add_parser("launch", parents=[leaf, waits], help="launch a training job and wait until running")
    p.add_argument("--gpu-type", required=True)
    p.add_argument("--gpu-count", type=int, default=1)
    p.add_argument("--mode", default="container", choices=["container", "bare_metal"])
    p.add_argument("--image", default="")
    p.add_argument("--name", default="")
    p.add_argument(
        "--dataset",
        type=int,
        action="append",
        required=True,
        metavar="VERSION_ID",
        help="dataset version id to train on (repeat for several)",
    )
    p.add_argument("--preset", default="tiny", help="model preset: tiny, gpt2-small, 1b, 7b")
    p.add_argument("--engine", default="fsdp", help="fsdp, ddp, deepspeed-zero1/2/3 where installed")
    p.add_argument("--hp", action="append", metavar="KEY=VALUE", help="a hyperparameter (repeatable)")
    p.add_argument("--hyperparameters", metavar="JSON", help="hyperparameters as a JSON object, @file or -")
    p.add_argument("--checkpoint-every-minutes", type=int)
    p.add_argument("--checkpoint-every-steps", type=int)
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument(
        "--elastic-min-gpus",
        type=int,
        default=0,
        metavar="K",
        help="after a preemption resume on at least K GPUs (same global batch and sample order); 0 = only on --gpus",
    )
    add_tier_and_volumes(p)
    p.add_argument("--idempotency-key")
    p.add_argument("--no-wait", action="store_true")
    p.set_defaults(func=cmd_jobs_launch)
    p = jobs.add_parser("stop", parents=[leaf, waits], help="stop a job (a final checkpoint first)")
    p.add_argument("id", type=int)
    p.add_argument("--wait", action="store_true", help="wait until it has stopped")
    p.set_defaults(func=cmd_jobs_stop)
    p = jobs.add_parser("logs", parents=[leaf], help="the job's log (newest attempt)")
    p.add_argument("id", type=int)
    p.add_argument("--lines", type=int, default=200, help="how many of the last lines (default 200)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the job ends")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls with --follow")
    p.set_defaults(func=cmd_jobs_logs)
    p = jobs.add_parser("checkpoints", parents=[leaf], help="the job's checkpoints")
    p.add_argument("id", type=int)
    p.set_defaults(func=cmd_jobs_checkpoints)
    p = jobs.add_parser("rollback", parents=[leaf], help="restart the job from its checkpoint at a step")
    p.add_argument("id", type=int)
    p.add_argument("--step", type=int, required=True)
    p.set_defaults(func=cmd_jobs_rollback)

    ds = sub.add_parser("datasets", help="the dataset marketplace").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = ds.add_parser("list", parents=[leaf, listing], help="datasets visible to your organization")
    p.add_argument("--domain", choices=[d.value for d in DatasetsListDomain])
    p.add_argument("-q", help="search in name and description")
    p.set_defaults(func=cmd_datasets_list)
    p = ds.add_parser("accept", parents=[leaf], help="accept a dataset's license for your organization")
    p.add_argument("id", type=int)
    p.add_argument("-y", "--yes", action="store_true", help="accept without asking")
    p.set_defaults(func=cmd_datasets_accept)

    sub.add_parser("wallet", parents=[leaf], help="balance and credit grants").set_defaults(func=cmd_wallet)

    apps = sub.add_parser("apps", help="the AI app marketplace").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    apps.add_parser("list", parents=[leaf, listing], help="apps you can call").set_defaults(func=cmd_apps_list)
    p = apps.add_parser("invoke", parents=[leaf], help="call an app (billed per call)")
    p.add_argument("slug")
    p.add_argument("--input", required=True, metavar="JSON", help="the input: a JSON object, @file or -")
    p.add_argument("--idempotency-key", help="a retried call with the same key runs and costs once")
    p.set_defaults(func=cmd_apps_invoke)
    _mark_commands(parser)
    return parser


def _mark_commands(parser: argparse.ArgumentParser) -> None:
    """Give every command's parser the default ``_command_parser`` = itself, so an unrecognized argument is
    reported by the command that was given (its usage and options), not by the top-level parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(_command_parser=child)
                _mark_commands(child)


def _options_of(parser: argparse.ArgumentParser) -> list[str]:
    """The options ``parser`` accepts, as its help writes them (``-o/--organization ORGANIZATION``)."""
    out = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        names = "/".join(action.option_strings)
        takes = action.nargs != 0
        out.append(f"{names} {action.metavar or action.dest.upper()}" if takes else names)
    return out


def refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> None:
    """Exit 2 (nothing sent to the portal) for arguments the command does not take: the command's usage, the
    arguments refused, close matches and every option the command accepts."""
    import difflib

    command = getattr(args, "_command_parser", parser)
    valid = [n for a in command._actions for n in a.option_strings]
    hints = []
    for extra in extras:
        if extra.startswith("-"):
            close = difflib.get_close_matches(extra.split("=", 1)[0], valid, n=1)
            if close:
                hints.append(f"{extra.split('=', 1)[0]}: did you mean {close[0]}?")
    message = f"unrecognized arguments: {' '.join(extras)}"
    if hints:
        message += "\n  " + "\n  ".join(hints)
    message += f"\nvalid options of '{command.prog}': {', '.join(_options_of(command))}"
    command.error(message)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        refuse_unknown(parser, args, extras)
    try:
        args.func(args)
    except CliError as exc:
        print(f"gpu-portal: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gpu-portal jobs logs 3 | head`
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
