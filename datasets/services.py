"""Operations of the datasets app: catalog entries, agreements, access revocation, mounts and uploads.

Each service is a typed keyword-only function that runs in one transaction, writes an audit row and
returns the object. Refusals are the named errors of ``datasets.errors`` (re-exported here), raised before
anything is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext as _

from billing.choices import TransactionKind
from billing.money import format_cny
from billing.services import InsufficientFunds, wallet_spend
from datasets.choices import UPLOAD_TRANSITIONS, DeidStatus, Domain, UploadFormat, UploadStatus, Visibility
from datasets.errors import (
    AccessRevoked,
    AgreementRequired,
    AgreementTextMismatch,
    DatasetError,
    DatasetNotFound,
    DatasetUnavailable,
    InvalidTransition,
    LicenseFeeUnpaid,
    LicenseVersionOutdated,
    UploadRefused,
)
from datasets.models import (
    AccessRevocation,
    Agreement,
    Dataset,
    DatasetMount,
    DatasetVersion,
    License,
    LicenseVersion,
    Upload,
)
from datasets.selectors import (
    agreement_current,
    dataset_version_for_org,
    required_license_version,
    revocation_for,
    version_needs_agreement,
    versions_mountable_by,
    versions_visible_to,
)
from portal.audit import audit_log
from portal.selectors import membership_of

if TYPE_CHECKING:
    from portal.models import Organization, User

__all__ = [
    "AccessRevoked",
    "AgreementRequired",
    "AgreementTextMismatch",
    "DatasetError",
    "DatasetNotFound",
    "DatasetUnavailable",
    "InvalidTransition",
    "LicenseFeeUnpaid",
    "LicenseVersionOutdated",
    "UploadRefused",
    "access_revoke",
    "agreement_accept",
    "corpus_import",
    "dataset_create",
    "dataset_version_create",
    "license_version_create",
    "mount_attach",
    "text_sha256",
    "upload_create",
    "upload_retry",
    "upload_run_stage",
    "upload_transition",
]


def text_sha256(text: str) -> str:
    """Hex SHA-256 of the UTF-8 bytes of ``text``: the hash an agreement records of the text shown."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _require_member(organization: Organization, user: User | None) -> None:
    if user is not None and membership_of(user=user, organization=organization) is None:
        raise DatasetNotFound("not a member of this organization")


# --- catalog ---------------------------------------------------------------------------------------------


def license_version_create(
    *,
    slug: str,
    name: str,
    text: str,
    commercial_use: bool,
    redistribution: bool,
    derivative_models: bool,
    attribution_text: str = "",
    field_of_use: str = "",
    term_days: int | None = None,
    price_micros: int = 0,
    acting_user: User | None = None,
) -> LicenseVersion:
    """Publish a new version of the license ``slug`` (created on first use), numbered 1, 2, …

    A version whose text and terms equal the newest one's is not duplicated: the newest is returned, so
    importing twice creates nothing. ``price_micros``: one-time fee per organization in micro-CNY (0 = free).
    """
    if price_micros < 0:
        raise DatasetError("a license price cannot be negative")
    terms: dict[str, Any] = {
        "commercial_use": commercial_use,
        "redistribution": redistribution,
        "derivative_models": derivative_models,
        "attribution_text": attribution_text,
        "field_of_use": field_of_use,
        "term_days": term_days,
        "price_micros": price_micros,
    }
    with transaction.atomic():
        lic, _created = License.objects.get_or_create(slug=slug, defaults={"name": name})
        current = lic.versions.select_for_update().order_by("-number").first()
        digest = text_sha256(text)
        if current is not None and current.text_sha256 == digest and all(
            getattr(current, k) == v for k, v in terms.items()
        ):
            return current
        lv = LicenseVersion.objects.create(
            license=lic,
            number=(current.number + 1) if current else 1,
            text=text,
            text_sha256=digest,
            **terms,
        )
        audit_log(action="datasets.license_version_create", actor=acting_user, obj=lv,
                  extra={"license": slug, "number": lv.number, "text_sha256": digest}, staff=acting_user is not None)
    return lv


def dataset_create(
    *,
    slug: str,
    name: str,
    domain: Domain | str,
    description: str = "",
    publisher: Organization | None = None,
    visibility: Visibility | str = Visibility.PUBLIC,
    attribution: str = "",
    source_url: str = "",
    acting_user: User | None = None,
) -> Dataset:
    """Create a catalog entry; ``publisher`` None means the platform. Returns the existing dataset when
    ``slug`` is taken (idempotent import)."""
    with transaction.atomic():
        dataset, created = Dataset.objects.get_or_create(
            slug=slug,
            defaults={
                "name": name,
                "domain": domain,
                "description": description,
                "publisher": publisher,
                "visibility": visibility,
                "attribution": attribution,
                "source_url": source_url,
            },
        )
        if created:
            audit_log(action="datasets.dataset_create", actor=acting_user, organization=publisher, obj=dataset,
                      extra={"slug": slug, "visibility": str(visibility)})
    return dataset


def dataset_version_create(
    *,
    dataset: Dataset,
    license_version: LicenseVersion,
    statistics: dict[str, Any],
    deid_report: dict[str, Any],
    deid_status: DeidStatus | str,
    shard_dir: str,
    tokenizer_path: str,
    source_files: list[dict[str, Any]],
    sample: str = "",
    pipeline: dict[str, Any] | None = None,
    acting_user: User | None = None,
) -> DatasetVersion:
    """Record a finished pipeline run as the dataset's next (immutable) version.

    ``statistics`` is the pipeline's ``statistics`` report (exact counts and the shard-folder manifest);
    ``shard_dir``/``tokenizer_path`` are relative to ``settings.DATA_DIR``; ``source_files`` lists
    ``{"file", "bytes", "sha256"}`` of the inputs; ``pipeline`` (optional) is stored in the manifest as
    ``{"source_documents", "duplicates_removed", "empty_documents"}`` from the validate/deduplicate reports.
    A version with the same source SHA-256s and license version as the newest one is not duplicated: the
    newest is returned.
    """
    with transaction.atomic():
        Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
        newest = dataset.versions.order_by("-number").first()
        if (
            newest is not None
            and newest.license_version_id == license_version.pk
            and newest.manifest.get("source_files") == source_files
        ):
            return newest
        version = DatasetVersion.objects.create(
            dataset=dataset,
            number=(newest.number + 1) if newest else 1,
            license_version=license_version,
            manifest={"source_files": source_files, "files": statistics.get("files", []), **(pipeline or {})},
            documents=statistics["documents"],
            bytes=statistics["bytes"],
            characters=statistics["characters"],
            tokens=statistics["tokens"],
            language=statistics.get("language", ""),
            deid_status=deid_status,
            deid_report=deid_report,
            sample=sample,
            shard_dir=shard_dir,
            tokenizer_path=tokenizer_path,
        )
        audit_log(action="datasets.version_create", actor=acting_user, organization=dataset.publisher, obj=version,
                  extra={"dataset": dataset.slug, "number": version.number, "documents": version.documents,
                         "tokens": version.tokens})
    return version


# --- agreements ------------------------------------------------------------------------------------------


def agreement_accept(
    *,
    organization: Organization,
    user: User,
    license_version: LicenseVersion,
    shown_text_sha256: str,
    ip: str | None,
    user_agent: str,
    dataset: Dataset | None = None,
) -> Agreement:
    """``user`` accepts ``license_version`` on behalf of ``organization``; returns the new ``Agreement``.

    Records organization, user, license version, the SHA-256 of the exact text shown, the time, IP and user
    agent (truncated to 500 characters). A paid license posts its fee once per (organization, license
    version) through ``billing.services.wallet_spend`` (kind ``LICENSE_FEE``, idempotency key
    ``license:<org id>:<license version id>``): accepting again records a new agreement and charges nothing.

    Raises (nothing written): ``DatasetNotFound`` (not a member, or no dataset visible to the organization
    uses this license), ``LicenseVersionOutdated`` (a newer version exists), ``AgreementTextMismatch`` (the
    hash is not that of the version's text), ``AccessRevoked`` (staff revoked access to ``dataset``),
    ``LicenseFeeUnpaid`` (the wallet cannot cover the fee).
    """
    _require_member(organization, user)
    visible = versions_visible_to(organization).filter(license_version__license=license_version.license)
    if dataset is not None:
        visible = visible.filter(dataset=dataset)
    if not visible.exists():
        raise DatasetNotFound("no dataset visible to this organization uses this license")
    newest = license_version.license.current_version
    if newest is not None and newest.pk != license_version.pk:
        raise LicenseVersionOutdated(
            _("%(license)s version %(old)s has been replaced by version %(new)s; review and accept the new text.")
            % {"license": license_version.license.name, "old": license_version.number, "new": newest.number}
        )
    if shown_text_sha256.strip().lower() != license_version.text_sha256:
        raise AgreementTextMismatch(
            _("The text you accepted is not the current text of %(license)s; reload it and accept again.")
            % {"license": str(license_version)}
        )
    if dataset is not None and revocation_for(organization, dataset) is not None:
        raise AccessRevoked(
            _("Access of %(org)s to %(dataset)s was revoked by the platform; contact support.")
            % {"org": organization.name, "dataset": dataset.name}
        )
    with transaction.atomic():
        charge_id: int | None = None
        if license_version.price_micros > 0:
            try:
                tx = wallet_spend(
                    organization=organization,
                    amount_micros=license_version.price_micros,
                    idempotency_key=f"license:{organization.pk}:{license_version.pk}",
                    kind=TransactionKind.LICENSE_FEE,
                    memo=f"License fee: {license_version}",
                    created_by=user,
                    metadata={"license_version": license_version.pk},
                )
            except InsufficientFunds as exc:
                raise LicenseFeeUnpaid(
                    _("The license fee of %(fee)s CNY for %(license)s cannot be paid: the wallet holds "
                      "%(available)s CNY. Top up the wallet, then accept again. Nothing was charged.")
                    % {"fee": format_cny(license_version.price_micros), "license": str(license_version),
                       "available": format_cny(exc.available_micros)}
                ) from exc
            charge_id = tx.pk
        agreement = Agreement.objects.create(
            organization=organization,
            user=user,
            license_version=license_version,
            dataset=dataset,
            text_sha256=license_version.text_sha256,
            ip=ip or None,
            user_agent=(user_agent or "")[:500],
            charge_transaction_id=charge_id,
        )
        audit_log(action="datasets.agreement_accept", actor=user, organization=organization, obj=agreement,
                  extra={"license_version": license_version.pk, "text_sha256": agreement.text_sha256,
                         "ip": ip, "charge_transaction": charge_id})
    return agreement


def access_revoke(
    *, organization: Organization, dataset: Dataset, reason: str, acting_user: User | None
) -> AccessRevocation:
    """Staff withdraw ``organization``'s access to ``dataset``: recorded as its own row and audited.

    Existing agreements stay as they were (evidence) but no longer count; new mounts are refused with
    ``AccessRevoked``. Mounts already running are not touched here. Raises ``DatasetError`` without a reason.
    """
    if not reason.strip():
        raise DatasetError("a revocation needs a reason")
    with transaction.atomic():
        revocation = AccessRevocation.objects.create(
            organization=organization, dataset=dataset, reason=reason.strip(), revoked_by=acting_user
        )
        audit_log(action="datasets.access_revoke", actor=acting_user, organization=organization, obj=revocation,
                  extra={"dataset": dataset.slug, "reason": reason.strip()}, staff=True)
    return revocation


# --- mounts ----------------------------------------------------------------------------------------------


def mount_attach(*, organization: Organization, user: User | None, version_id: int, consumer: str) -> DatasetMount:
    """Record that ``consumer`` (an opaque string such as ``"instances.trainingjob:42"``) reads dataset
    version ``version_id`` read-only on behalf of ``organization``; returns the ``DatasetMount``
    (``mount.shard_dir`` is the shard folder, ``mount.version`` the version).

    Rule (DESIGN §4): a version of another publisher's dataset is mountable only while the organization
    holds a current agreement to the newest version of its license; the organization's own datasets need
    none. Raises ``DatasetNotFound`` (version not visible, or ``user`` not a member), ``AgreementRequired``
    (message names the dataset and license version) or its subclass ``AccessRevoked``, and
    ``DatasetUnavailable`` (shard folder incomplete) — all subclasses of ``DatasetError``.
    """
    if not consumer or len(consumer) > 200:
        raise DatasetError("consumer must be 1 to 200 characters")
    _require_member(organization, user)
    version = dataset_version_for_org(organization, version_id)
    agreement: Agreement | None = None
    if version_needs_agreement(organization, version):
        if revocation_for(organization, version.dataset) is not None:
            raise AccessRevoked(
                _("Access of %(org)s to %(dataset)s was revoked by the platform; contact support.")
                % {"org": organization.name, "dataset": version.dataset.name}
            )
        lv = required_license_version(version)
        agreement = agreement_current(organization, lv, dataset=version.dataset)
        if agreement is None:
            raise AgreementRequired(
                _("%(dataset)s needs an agreement to %(license)s version %(number)s before it can be mounted.")
                % {"dataset": version.dataset.name, "license": lv.license.name, "number": lv.number}
            )
    if not version.shards_ready:
        raise DatasetUnavailable(f"the shard folder of {version} is not complete")
    with transaction.atomic():
        mount = DatasetMount.objects.create(
            organization=organization, user=user, version=version, agreement=agreement, consumer=consumer
        )
        audit_log(action="datasets.mount_attach", actor=user, organization=organization, obj=mount,
                  extra={"version": version.pk, "dataset": version.dataset.slug, "consumer": consumer,
                         "agreement": agreement.pk if agreement else None})
    return mount


# --- corpus import ---------------------------------------------------------------------------------------

STAGE_WEIGHTS: dict[str, tuple[int, int]] = {
    "validate": (0, 10),
    "deidentify": (10, 20),
    "deduplicate": (30, 5),
    "tokenizer": (35, 25),
    "shards": (60, 35),
    "statistics": (95, 5),
}
"""``stage -> (percent at start, percent share)`` of the whole pipeline, for progress bars."""


def pipeline_percent(stage: str, done: int, total: int) -> int:
    """Overall percent (0–100) when ``stage`` has processed ``done`` of ``total`` bytes."""
    start, share = STAGE_WEIGHTS.get(stage, (0, 0))
    frac = 1.0 if total <= 0 else min(done, total) / total
    return min(100, start + int(share * frac))


def _first_text(path: Path, limit: int = 600) -> str:
    """The first ``limit`` characters of the first document of a pipeline JSONL file (a de-identified sample)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                text: str = json.loads(line)["text"]
                return text[:limit]
    return ""


def _pipeline_counts(reports: dict[str, Any]) -> dict[str, int]:
    """Document counts before de-duplication, kept in a version's manifest beside the exact statistics."""
    return {
        "source_documents": int(reports["validate"]["documents"]),
        "empty_documents": int(reports["validate"]["empty_documents"]),
        "duplicates_removed": int(reports["deduplicate"]["duplicates"]),
    }


def _relative(path: Path) -> str:
    return str(path.resolve().relative_to(Path(settings.DATA_DIR).resolve()))


def corpus_import(*, path: Path, domain: str, acting_user: User | None = None) -> DatasetVersion:
    """Import one corpus file as a public platform dataset: catalog entry, license version, pipeline, version.

    Runs the real pipeline (``datasets.pipeline.run_pipeline``: validate, de-identify, deduplicate, a BPE
    tokenizer trained on the corpus, shards, statistics) in ``DATA_DIR/datasets/<slug>/<sha256[:16]>/``
    and records progress in ``Dataset.preparing``. Idempotent: a file whose SHA-256 is already the source
    of the dataset's newest version returns that version without running anything; finished pipeline
    stages are reused after a crash. Raises ``PipelineError`` when the corpus is malformed (recorded in
    ``Dataset.preparing["error"]``).
    """
    from datasets.corpora import spec_for
    from datasets.pipeline import PipelineError, run_pipeline
    from datasets.pipeline.common import file_sha256

    spec = spec_for(domain, path)
    sha = file_sha256(path)
    source = [{"file": path.name, "bytes": path.stat().st_size, "sha256": sha}]
    lv = license_version_create(
        slug=spec.license_slug, name=spec.license_name, text=spec.read_license_text(path.parent),
        commercial_use=spec.commercial_use, redistribution=spec.redistribution,
        derivative_models=spec.derivative_models, attribution_text=spec.attribution, field_of_use=spec.field_of_use,
    )
    dataset = dataset_create(
        slug=spec.slug, name=spec.name, domain=spec.domain, description=spec.description,
        attribution=spec.attribution, source_url=spec.source_url, acting_user=acting_user,
    )
    newest = dataset.latest_version
    if newest is not None and newest.manifest.get("source_files") == source and newest.license_version_id == lv.pk:
        return newest
    workdir = Path(settings.DATA_DIR) / "datasets" / spec.slug / sha[:16]
    last = {"percent": -1}
    thread = threading.get_ident()

    def on_progress(stage: str, done: int, total: int) -> None:
        # ``tokenizers`` may pull the training texts on its own threads: only this thread writes progress
        # (another thread would open a second database connection mid-transaction).
        percent = pipeline_percent(stage, done, total)
        if percent != last["percent"] and threading.get_ident() == thread:
            last["percent"] = percent
            Dataset.objects.filter(pk=dataset.pk).update(preparing={"stage": stage, "percent": percent})

    try:
        reports = run_pipeline(path, workdir, fmt="jsonl", on_progress=on_progress)
    except PipelineError as exc:
        Dataset.objects.filter(pk=dataset.pk).update(preparing={"stage": exc.stage, "error": exc.as_dict()})
        raise
    shards = workdir / "shards"
    version = dataset_version_create(
        dataset=dataset, license_version=lv, statistics=reports["statistics"], deid_report=reports["deidentify"],
        deid_status=DeidStatus.DEIDENTIFIED, shard_dir=_relative(shards),
        tokenizer_path=_relative(shards / "tokenizer.json"), source_files=source,
        sample=_first_text(workdir / "deduplicated.jsonl"), pipeline=_pipeline_counts(reports),
        acting_user=acting_user,
    )
    Dataset.objects.filter(pk=dataset.pk).update(preparing={})
    return version


# --- uploads ---------------------------------------------------------------------------------------------

UPLOAD_STAGES = ("validate", "deidentify", "deduplicate", "tokenizer", "shards", "statistics", "finish")
"""Celery runs one task per stage, in this order; ``finish`` records the resulting private version."""

OWN_DATA_LICENSE_TEXT = (
    "Data uploaded by your organization. It stays private to your organization; you confirm that you have the "
    "right to use it for training and that personal data in it may be processed for de-identification."
)
_COPY_CHUNK = 1024 * 1024


def _chunks(file: Any) -> Any:
    """Chunks of an uploaded file: Django's ``UploadedFile.chunks`` or ``read(1 MiB)`` of a binary file."""
    if hasattr(file, "chunks"):
        yield from file.chunks(_COPY_CHUNK)
        return
    while chunk := file.read(_COPY_CHUNK):
        yield chunk


def upload_transition(upload: Upload, new: UploadStatus | str, **fields: Any) -> Upload:
    """Move ``upload`` to status ``new`` if ``UPLOAD_TRANSITIONS`` allows it (compare-and-set on the old
    status), saving ``fields`` too; raises ``InvalidTransition`` otherwise."""
    old = upload.status
    if new not in UPLOAD_TRANSITIONS[old]:
        raise InvalidTransition(f"upload {upload.pk}: {old} → {new} is not allowed")
    fields = {**fields, "status": new, "updated_at": timezone.now()}
    if Upload.objects.filter(pk=upload.pk, status=old).update(**fields) != 1:
        raise InvalidTransition(f"upload {upload.pk} changed status concurrently")
    for key, value in fields.items():
        setattr(upload, key, value)
    return upload


def upload_create(
    *,
    organization: Organization,
    user: User,
    file: Any,
    name: str,
    fmt: UploadFormat | str,
    text_column: str = "",
    keep_original: bool = False,
    domain: Domain | str = Domain.OTHER,
    original_filename: str = "",
    tokenizer_from: int | None = None,
) -> Upload:
    """Store an uploaded corpus under ``DATA_DIR/uploads/<id>/`` and start its pipeline (after commit).

    ``file`` is a Django ``UploadedFile`` (already streamed to a temporary file by the upload handlers) or
    any binary file object; it is copied in 1 MiB chunks, never read whole. Raises ``UploadRefused``
    (nothing stored, no row) for an unknown format, a CSV without ``text_column``, or more than
    ``settings.DATASET_UPLOAD_MAX_BYTES`` bytes (counted while copying) or a ``tokenizer_from`` version the
    organization cannot mount (that version's tokenizer is then copied instead of training one), and
    ``DatasetNotFound`` when
    ``user`` is not a member.
    """
    _require_member(organization, user)
    limit: int = settings.DATASET_UPLOAD_MAX_BYTES
    if fmt not in UploadFormat.values:
        raise UploadRefused(_("Unknown format %(fmt)s; use JSONL, TXT or CSV.") % {"fmt": fmt})
    if fmt == UploadFormat.CSV and not text_column.strip():
        raise UploadRefused(_("A CSV upload needs the name of the column that holds the text."))
    declared = getattr(file, "size", None)
    too_big = _("The file is larger than the upload limit of %(limit)s bytes.") % {"limit": f"{limit:,}"}
    if declared is not None and declared > limit:
        raise UploadRefused(too_big)
    if tokenizer_from is not None and not versions_mountable_by(organization).filter(pk=tokenizer_from).exists():
        raise UploadRefused(_("That tokenizer is not available to your organization."))
    root = Path(settings.DATA_DIR) / "uploads"
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".incoming-{uuid.uuid4().hex}.partial"
    size = 0
    try:
        with open(partial, "wb") as out:
            for chunk in _chunks(file):
                size += len(chunk)
                if size > limit:
                    raise UploadRefused(too_big)
                out.write(chunk)
        with transaction.atomic():
            upload = Upload.objects.create(
                organization=organization, user=user, name=name.strip()[:200] or original_filename[:200] or "upload",
                format=fmt, text_column=text_column.strip() if fmt == UploadFormat.CSV else "",
                original_filename=original_filename[:255], size_bytes=size, keep_original=keep_original,
                domain=domain, tokenizer_from_id=tokenizer_from,
            )
            final = root / str(upload.pk) / f"original.{fmt}"
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(partial, final)
            upload.stored_path = _relative(final)
            upload.save(update_fields=["stored_path"])
            audit_log(action="datasets.upload_create", actor=user, organization=organization, obj=upload,
                      extra={"format": str(fmt), "bytes": size, "keep_original": keep_original})
            transaction.on_commit(lambda: _enqueue_stage(upload.pk, UPLOAD_STAGES[0]))
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return upload


def _enqueue_stage(upload_id: int, stage: str) -> None:
    from datasets.tasks import upload_stage

    upload_stage.delay(upload_id, stage)


def upload_retry(*, upload: Upload, user: User) -> Upload:
    """Start a failed upload again from the stage that failed; finished stages are reused, not redone.

    Raises ``UploadRefused`` when the input itself was refused (its file is gone: upload a corrected one)
    and ``InvalidTransition`` unless the upload is ``failed``.
    """
    _require_member(upload.organization, user)
    stage = (upload.error or {}).get("stage") or UPLOAD_STAGES[0]
    if stage == "validate":
        raise UploadRefused(_("This file was refused; correct it and upload it again."))
    with transaction.atomic():
        upload_transition(upload, UploadStatus.PROCESSING, stage=stage, error={})
        audit_log(action="datasets.upload_retry", actor=user, organization=upload.organization, obj=upload,
                  extra={"stage": stage})
        transaction.on_commit(lambda: _enqueue_stage(upload.pk, stage))
    return upload


def _upload_fail(upload: Upload, error: dict[str, Any]) -> None:
    """Record a failure. A refused input (validate stage) leaves nothing behind: the stage outputs and,
    unless the user asked to keep it, the stored original are removed."""
    if error.get("stage") == "validate":
        shutil.rmtree(upload.workdir, ignore_errors=True)
        if not upload.keep_original and upload.original_path is not None:
            upload.original_path.unlink(missing_ok=True)
            shutil.rmtree(upload.original_path.parent, ignore_errors=True)
            upload.stored_path = ""
    with transaction.atomic():
        upload_transition(upload, UploadStatus.FAILED, error=error, stored_path=upload.stored_path)
        audit_log(action="datasets.upload_fail", actor=None, organization=upload.organization, obj=upload,
                  extra={"stage": error.get("stage"), "code": error.get("code"), "message": error.get("message")})


def upload_run_stage(*, upload_id: int, stage: str) -> Upload | None:
    """Run ``stage`` of an upload's pipeline and enqueue the next one; returns the upload (None if gone).

    The first stage moves ``received`` to ``processing``. Progress is written to ``Upload.stage`` /
    ``percent``. A ``PipelineError`` marks the upload ``failed`` with ``error = PipelineError.as_dict()``
    (stage, code, message, line); any other exception is recorded as stage + "internal error" and re-raised.
    An upload that is not processing (ready, failed) is left alone, so a duplicate task does nothing.
    """
    from datasets import pipeline as p

    upload = Upload.objects.select_related("organization").filter(pk=upload_id).first()
    if upload is None:
        return None
    if upload.status == UploadStatus.RECEIVED and stage == UPLOAD_STAGES[0]:
        upload_transition(upload, UploadStatus.PROCESSING, stage=stage, percent=0)
    if upload.status != UploadStatus.PROCESSING:
        return upload
    Upload.objects.filter(pk=upload.pk).update(stage=stage, updated_at=timezone.now())
    work = upload.workdir
    work.mkdir(parents=True, exist_ok=True)
    documents, deid, dedup = work / "documents.jsonl", work / "deidentified.jsonl", work / "deduplicated.jsonl"
    tokenizer, shards = work / p.TOKENIZER_FILE, work / "shards"
    last = {"percent": -1}
    thread = threading.get_ident()

    def progress(done: int, total: int) -> None:
        percent = pipeline_percent(stage, done, total)
        if percent != last["percent"] and threading.get_ident() == thread:  # see corpus_import
            last["percent"] = percent
            Upload.objects.filter(pk=upload.pk).update(percent=percent, updated_at=timezone.now())

    reports = dict(upload.report or {})
    try:
        if stage == "validate":
            original = upload.original_path
            if original is None or not original.is_file():
                raise p.PipelineError("validate", "the uploaded file is no longer stored", code="input")
            reports[stage] = p.validate(original, documents, fmt=upload.format,  # type: ignore[arg-type]
                                        text_column=upload.text_column or None, progress=progress)
        elif stage == "deidentify":
            from datasets.policy import deid_options_for

            reports[stage] = p.deidentify_file(documents, deid, options=deid_options_for(upload.organization),
                                               progress=progress)
        elif stage == "deduplicate":
            reports[stage] = p.deduplicate(deid, dedup, progress=progress)
        elif stage == "tokenizer" and upload.tokenizer_from is not None:
            shutil.copyfile(upload.tokenizer_from.tokenizer_file, tokenizer)  # re-used, not trained
            reports[stage] = {"reused_from_version": upload.tokenizer_from_id,
                              "vocab_size": p.load_tokenizer(tokenizer).get_vocab_size(), "eos_id": 0}
        elif stage == "tokenizer":
            reports[stage] = p.train_tokenizer(dedup, tokenizer, progress=progress)
        elif stage == "shards":
            reports[stage] = {k: v for k, v in p.write_shards(dedup, tokenizer, shards, progress=progress).items()
                              if k != "shards"}
        elif stage == "statistics":
            reports[stage] = p.statistics(dedup, shards, work / "statistics.json", progress=progress)
        elif stage == "finish":
            return _upload_finish(upload, reports)
        else:
            raise ValueError(f"unknown upload stage {stage!r}")
    except p.PipelineError as exc:
        _upload_fail(upload, exc.as_dict())
        return upload
    except Exception as exc:
        _upload_fail(upload, {"stage": stage, "code": "internal", "message": f"internal error: {exc}", "line": None})
        raise
    nxt = UPLOAD_STAGES[UPLOAD_STAGES.index(stage) + 1]
    Upload.objects.filter(pk=upload.pk).update(report=reports, percent=pipeline_percent(stage, 1, 1))
    upload.report = reports
    transaction.on_commit(lambda: _enqueue_stage(upload.pk, nxt))
    return upload


def _upload_finish(upload: Upload, reports: dict[str, Any]) -> Upload:
    """Record the finished pipeline as a private version of the organization's dataset named like the upload."""
    work = upload.workdir
    stats = json.loads((work / "statistics.json").read_text(encoding="utf-8"))
    source = [{"file": upload.original_filename or f"upload-{upload.pk}.{upload.format}",
               "bytes": upload.size_bytes, "sha256": reports["validate"]["input_sha256"]}]
    lv = license_version_create(
        slug="own-data", name="Own data (private to the uploading organization)", text=OWN_DATA_LICENSE_TEXT,
        commercial_use=True, redistribution=False, derivative_models=True,
    )
    org = upload.organization
    base = slugify(upload.name, allow_unicode=True)[:60] or "upload"
    with transaction.atomic():
        dataset = dataset_create(
            slug=f"org{org.pk}-{base}", name=upload.name, domain=upload.domain,
            description=_("Uploaded by %(org)s.") % {"org": org.name}, publisher=org,
            visibility=Visibility.PRIVATE, acting_user=upload.user,
        )
        if dataset.publisher_id != org.pk:  # pragma: no cover - slugs are prefixed by the organization id
            raise DatasetError("dataset slug collision")
        version = dataset_version_create(
            dataset=dataset, license_version=lv, statistics=stats, deid_report=reports.get("deidentify", {}),
            deid_status=DeidStatus.DEIDENTIFIED, shard_dir=_relative(work / "shards"),
            tokenizer_path=_relative(work / "shards" / "tokenizer.json"), source_files=source,
            sample=_first_text(work / "deduplicated.jsonl"), pipeline=_pipeline_counts(reports),
            acting_user=upload.user,
        )
        upload_transition(upload, UploadStatus.READY, stage="finish", percent=100, dataset_version=version,
                          report=reports)
        audit_log(action="datasets.upload_ready", actor=upload.user, organization=org, obj=upload,
                  extra={"version": version.pk, "documents": version.documents})
    # The validated copy still holds personal data; the original goes unless the user asked to keep it.
    (work / "documents.jsonl").unlink(missing_ok=True)
    if not upload.keep_original and upload.original_path is not None:
        shutil.rmtree(upload.original_path.parent, ignore_errors=True)
        Upload.objects.filter(pk=upload.pk).update(stored_path="")
        upload.stored_path = ""
    return upload
