"""``manage.py import_corpora`` on the real corpora of ``../shared/corpora``: documented counts, exact statistics,
shards that round-trip, idempotency.

The two small Chinese corpora (finance, medical) are imported through the real pipeline once per session (the
pipeline's finished stages are reused by later tests, so each test's fresh database imports in a second).
The legal and English medical corpora take about 80 s each on 2 cores: ``test_the_full_import_*`` is marked
``slow``; their document counts are checked against the real files in every run.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]
CORPORA = Path(os.environ.get("PORTAL_CORPORA_DIR") or ROOT.parent / "shared" / "corpora")
SMALL = {"finance": "finance_zh_lawrefbook.jsonl", "medical": "medical_zh_lawrefbook.jsonl"}

pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")


def _texts(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def _normal(text: str) -> str:
    import unicodedata

    return " ".join(unicodedata.normalize("NFC", text).split())


@pytest.fixture(scope="session")
def small_corpora(tmp_path_factory: Any) -> Path:
    """A folder holding links to the real finance and medical (zh) corpus files."""
    folder = tmp_path_factory.mktemp("corpora")
    for domain, name in SMALL.items():
        (folder / domain).mkdir()
        (folder / domain / name).symlink_to(CORPORA / domain / name)
    return folder


@pytest.fixture(scope="session")
def session_data_dir(tmp_path_factory: Any) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def imported(settings: Any, db: Any, small_corpora: Path, session_data_dir: Path) -> str:
    settings.DATA_DIR = session_data_dir
    out = io.StringIO()
    call_command("import_corpora", "--folder", str(small_corpora), "--wait", stdout=out)
    return out.getvalue()


def test_the_corpus_files_hold_the_documented_document_counts() -> None:
    from datasets.corpora import CORPORA as SPECS
    from datasets.corpora import DOCUMENTED_COUNTS
    from datasets.pipeline import count_documents

    counts = {spec.slug: count_documents(CORPORA / spec.domain / spec.file) for spec in SPECS}
    assert (
        counts
        == DOCUMENTED_COUNTS
        == {
            "legal-zh-lawrefbook": 1589,
            "finance-zh-lawrefbook": 242,
            "medical-zh-lawrefbook": 153,
            "medquad-en": 5486,
        }
    )


def test_import_creates_the_documented_datasets_with_exact_statistics(imported: str) -> None:
    from datasets.models import Dataset

    assert sorted(Dataset.objects.values_list("slug", "domain", "visibility")) == [
        ("finance-zh-lawrefbook", "finance", "public"),
        ("medical-zh-lawrefbook", "medical", "public"),
    ]
    for domain, name in SMALL.items():
        path = CORPORA / domain / name
        texts = _texts(path)
        version = Dataset.objects.get(domain=domain).latest_version
        assert version.manifest["source_documents"] == len(texts) == {"finance": 242, "medical": 153}[domain]
        unique = list({_normal(t): t for t in reversed(texts)}.values())  # same count as keep-first
        assert version.manifest["duplicates_removed"] == len(texts) - len(unique) == 0
        assert version.deid_report["total_replacements"] == 0  # statutes hold no personal identifiers
        assert version.documents == len(texts)
        assert version.bytes == sum(len(t.encode("utf-8")) for t in texts)
        assert version.characters == sum(len(t) for t in texts)
        assert version.language == "zh"
        assert version.manifest["source_files"] == [
            {
                "file": name,
                "bytes": path.stat().st_size,
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            }
        ]
        assert version.sample == texts[0][:600]
        assert version.license_version.license.slug == "cn-law-public-domain"


def test_shards_round_trip_to_the_same_token_ids(imported: str) -> None:
    from tokenizers import Tokenizer

    from datasets.models import Dataset
    from instances.runtime.shards import ShardSet

    version = Dataset.objects.get(slug="medical-zh-lawrefbook").latest_version
    tok = Tokenizer.from_file(str(version.tokenizer_file))
    tok.encode_special_tokens = True
    texts = _texts(CORPORA / "medical" / SMALL["medical"])
    expected: list[int] = []
    for text in texts:
        expected.extend(tok.encode(text, add_special_tokens=False).ids)
        expected.append(0)
    shards = ShardSet(version.shard_path)
    assert version.tokens == len(shards) == len(expected)
    assert list(shards.tokens(0, len(shards))) == expected
    assert tok.decode(expected[: expected.index(0)]) == texts[0]


def test_a_second_import_creates_nothing(imported: str, small_corpora: Path) -> None:
    from datasets.models import Dataset, DatasetVersion, License, LicenseVersion
    from portal.models import AuditEvent

    before = [m.objects.count() for m in (Dataset, DatasetVersion, License, LicenseVersion, AuditEvent)]
    out = io.StringIO()
    call_command("import_corpora", "--folder", str(small_corpora), stdout=out)
    assert [m.objects.count() for m in (Dataset, DatasetVersion, License, LicenseVersion, AuditEvent)] == before
    assert out.getvalue().splitlines() == [
        "finance-zh-lawrefbook: up to date (version 1, 242 documents)",
        "medical-zh-lawrefbook: up to date (version 1, 153 documents)",
    ]


def test_a_missing_folder_is_skipped_with_a_message(db: Any, tmp_path: Path) -> None:
    from datasets.models import Dataset

    out = io.StringIO()
    call_command("import_corpora", "--folder", str(tmp_path / "nowhere"), stdout=out)
    assert out.getvalue() == f"No corpora at {tmp_path / 'nowhere'}; nothing imported.\n"
    assert Dataset.objects.count() == 0


def test_the_background_import_shows_progress_then_the_version(
    settings: Any, db: Any, small_corpora: Path, session_data_dir: Path, django_capture_on_commit_callbacks: Any
) -> None:
    from datasets.models import Dataset

    settings.DATA_DIR = session_data_dir
    out = io.StringIO()
    call_command("import_corpora", "--folder", str(small_corpora), stdout=out)  # Celery is eager in tests
    assert "finance-zh-lawrefbook: import queued (progress in the console catalog)" in out.getvalue()
    finance = Dataset.objects.get(slug="finance-zh-lawrefbook")
    assert finance.preparing == {}
    assert finance.latest_version.documents == 242


@pytest.mark.slow
@pytest.mark.engine_independent(
    "the large corpora's CPU-bound pipeline (de-identification, tokenizer, shards); the import's database writes "
    "are those of the small corpora's import, which the tests above run on PostgreSQL"
)
def test_the_full_import_yields_every_documented_dataset(settings: Any, db: Any, tmp_path: Path) -> None:
    from datasets.corpora import DOCUMENTED_COUNTS
    from datasets.models import Dataset

    settings.DATA_DIR = tmp_path
    call_command("import_corpora", "--folder", str(CORPORA), "--wait", stdout=io.StringIO())
    got = {d.slug: d.latest_version for d in Dataset.objects.all()}
    assert {slug: v.manifest["source_documents"] for slug, v in got.items()} == DOCUMENTED_COUNTS
    # MedQuAD holds 3 documents whose text repeats an earlier one (after whitespace normalisation)
    medquad = _texts(CORPORA / "medical" / "medical_en_medquad.jsonl")
    unique = len({_normal(t) for t in medquad})
    assert got["medquad-en"].manifest["duplicates_removed"] == len(medquad) - unique == 3
    assert {slug: v.documents for slug, v in got.items()} == {
        "legal-zh-lawrefbook": 1589,
        "finance-zh-lawrefbook": 242,
        "medical-zh-lawrefbook": 153,
        "medquad-en": 5483,
    }
    assert got["medquad-en"].language == "en"
    assert "CC BY 4.0" in got["medquad-en"].dataset.attribution
    assert got["medquad-en"].license_version.text == (CORPORA / "medical" / "LICENSE-MedQuAD-CC-BY-4.0.txt").read_text(
        encoding="utf-8"
    )
