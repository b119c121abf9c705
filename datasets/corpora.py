"""What the platform's licensed corpora are: catalog entry and license per corpus file.

The folder layout and provenance are described in ``shared/corpora/SOURCES.md``; document counts there:
legal 1,589; finance 242; medical (zh) 153; medical (en, MedQuAD) 5,486.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

CN_LAW_LICENSE_TEXT = """Chinese laws, regulations and judicial interpretations — public-domain text

The texts of this dataset are laws, administrative regulations, judicial interpretations, ministry rules and
local regulations of the People's Republic of China, collected by the LawRefBook/Laws project
(https://github.com/LawRefBook/Laws, commit 2f4c5c23716267af9dbebbbbd6cbbf732b101981) from the national
database of laws and regulations (https://flk.npc.gov.cn).

Under Article 5 of the Copyright Law of the People's Republic of China (2020), the Law does not apply to
"laws and regulations, resolutions, decisions and orders of state organs, and other documents of a
legislative, administrative or judicial nature, and their official translations". The texts may therefore
be used, copied, redistributed and used to train and publish derivative models, for any purpose including
commercial use.

The platform converted the texts to plain-text JSONL and removed markdown headings only. The platform gives
no warranty that a text is the current or official version; check the official source before relying on it.
"""

CN_LAW_ATTRIBUTION = "Texts from the national database of laws and regulations (flk.npc.gov.cn) via LawRefBook/Laws."

MEDQUAD_ATTRIBUTION = (
    'MedQuAD — Asma Ben Abacha and Dina Demner-Fushman, "A Question-Entailment Approach to Question '
    'Answering", BMC Bioinformatics 20, 511 (2019). https://github.com/abachaa/MedQuAD — licensed under '
    "CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/). Converted to JSONL; phone numbers and other "
    "identifiers replaced by placeholders."
)


@dataclass(frozen=True)
class CorpusSpec:
    """Catalog entry and license of one corpus file (``file`` inside ``<folder>/<domain>/``)."""

    file: str
    slug: str
    name: str
    domain: str
    description: str
    license_slug: str
    license_name: str
    license_text_file: str | None = None  # a file beside the corpus holding the license text
    license_text: str = ""
    attribution: str = ""
    source_url: str = ""
    commercial_use: bool = True
    redistribution: bool = True
    derivative_models: bool = True
    field_of_use: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def read_license_text(self, folder: Path) -> str:
        if self.license_text_file:
            return (folder / self.license_text_file).read_text(encoding="utf-8")
        return self.license_text


_LAW = {
    "license_slug": "cn-law-public-domain",
    "license_name": "Chinese statutes (public domain, Copyright Law art. 5)",
    "license_text": CN_LAW_LICENSE_TEXT,
    "attribution": CN_LAW_ATTRIBUTION,
    "source_url": "https://github.com/LawRefBook/Laws",
}

CORPORA: tuple[CorpusSpec, ...] = (
    CorpusSpec(
        file="legal_zh_lawrefbook.jsonl",
        slug="legal-zh-lawrefbook",
        name="中国法律法规 — Chinese laws and regulations",
        domain="legal",
        description="1,589 national laws, administrative regulations, judicial interpretations and Beijing, "
        "Shanghai and Guangdong local regulations (newest version of each), Chinese.",
        **_LAW,  # type: ignore[arg-type]
    ),
    CorpusSpec(
        file="finance_zh_lawrefbook.jsonl",
        slug="finance-zh-lawrefbook",
        name="金融法规 — Chinese finance, tax and company law",
        domain="finance",
        description="242 Chinese laws, regulations and judicial interpretations on banking, securities, "
        "insurance, tax, accounting and companies, Chinese.",
        **_LAW,  # type: ignore[arg-type]
    ),
    CorpusSpec(
        file="medical_zh_lawrefbook.jsonl",
        slug="medical-zh-lawrefbook",
        name="医药卫生法规 — Chinese medical and health law",
        domain="medical",
        description="153 Chinese laws and regulations on medicine, drugs, public health, vaccines and food "
        "safety, Chinese.",
        **_LAW,  # type: ignore[arg-type]
    ),
    CorpusSpec(
        file="medical_en_medquad.jsonl",
        slug="medquad-en",
        name="MedQuAD — medical questions and answers (English)",
        domain="medical",
        description="5,486 documents of question–answer pairs from NIH websites (GARD, Genetics Home Reference, "
        "MedlinePlus, NINDS, NIDDK, NCI, NHLBI, CDC, NIHSeniorHealth), English.",
        license_slug="cc-by-4.0",
        license_name="Creative Commons Attribution 4.0 International (CC BY 4.0)",
        license_text_file="LICENSE-MedQuAD-CC-BY-4.0.txt",
        attribution=MEDQUAD_ATTRIBUTION,
        source_url="https://github.com/abachaa/MedQuAD",
    ),
)

DOCUMENTED_COUNTS = {
    "legal-zh-lawrefbook": 1589,
    "finance-zh-lawrefbook": 242,
    "medical-zh-lawrefbook": 153,
    "medquad-en": 5486,
}
"""Document counts per dataset as documented in ``shared/corpora/SOURCES.md``."""


def spec_for(domain: str, path: Path) -> CorpusSpec:
    """The spec of a known corpus file, or a generic public-domain-unknown entry for any other file."""
    for spec in CORPORA:
        if spec.file == path.name:
            return spec
    stem = path.stem.replace("_", "-").lower()
    return CorpusSpec(
        file=path.name,
        slug=stem[:100],
        name=path.stem,
        domain=domain,
        description=f"Imported from {path.name}.",
        license_slug="unspecified",
        license_name="License not stated (review before use)",
        license_text="The publisher did not state a license for this corpus. Use it for evaluation only until "
        "its license has been reviewed.",
        commercial_use=False,
        redistribution=False,
        derivative_models=False,
        field_of_use="evaluation",
    )
