"""``manage.py import_corpora [--folder PATH] [--wait]``: the licensed corpora as public catalog datasets."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Import <folder>/{legal,finance,medical}/*.jsonl as public datasets (de-identified, tokenized, sharded). "
        "Default folder: $PORTAL_CORPORA_DIR or <repo>/../shared/corpora; skipped when absent. Without --wait "
        "the pipelines run as Celery tasks (the legal corpus takes over a minute on 2 cores) and the catalog "
        "shows their progress; corpora already imported from the same file are left alone."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--folder", type=Path, default=None, help="folder holding <domain>/*.jsonl")
        parser.add_argument("--wait", action="store_true", help="run the pipelines here and wait for them")

    def handle(self, *args: Any, **options: Any) -> None:
        from datasets.corpora import spec_for
        from datasets.models import Dataset
        from datasets.pipeline import corpus_files, default_corpora_dir
        from datasets.pipeline.common import file_sha256
        from datasets.services import corpus_import, dataset_create
        from datasets.tasks import import_corpus

        folder: Path = options["folder"] or default_corpora_dir(settings.BASE_DIR)
        files = corpus_files(folder)
        if not files:
            self.stdout.write(f"No corpora at {folder}; nothing imported.")
            return
        if not options["wait"]:
            _ensure_broker_folders()
        for domain, path in files:
            spec = spec_for(domain, path)
            dataset = Dataset.objects.filter(slug=spec.slug).first()
            newest = dataset.latest_version if dataset else None
            if newest is not None and newest.manifest.get("source_files", [{}])[0].get("sha256") == file_sha256(path):
                self.stdout.write(f"{spec.slug}: up to date (version {newest.number}, {newest.documents} documents)")
                continue
            if options["wait"]:
                started = time.monotonic()
                version = corpus_import(path=path, domain=domain)
                self.stdout.write(
                    f"{spec.slug}: version {version.number}, {version.documents} documents, {version.tokens} tokens "
                    f"in {time.monotonic() - started:.1f} s"
                )
            else:
                dataset = dataset_create(
                    slug=spec.slug,
                    name=spec.name,
                    domain=spec.domain,
                    description=spec.description,
                    attribution=spec.attribution,
                    source_url=spec.source_url,
                )
                Dataset.objects.filter(pk=dataset.pk, versions__isnull=True).update(
                    preparing={"stage": "queued", "percent": 0}
                )
                import_corpus.delay(str(path), domain)
                self.stdout.write(f"{spec.slug}: import queued (progress in the console catalog)")


def _ensure_broker_folders() -> None:
    """The filesystem broker (the embedded default) needs its folders before the first message is sent;
    this command may run before any worker has started."""
    if not str(settings.CELERY_BROKER_URL).startswith("filesystem"):
        return
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(key)
        if folder:
            Path(str(folder)).mkdir(parents=True, exist_ok=True)
