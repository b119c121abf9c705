"""Template filters that show stored English words in the reader's language: ledger memos, pipeline
stage names, corpus language codes.

``{{ label|ledger_memo }}``: a memo known only by its English text (the statement's app-call lines, grouped by
memo) in the reader's language, recognised by ``billing.memos`` (the one home of the memos' codes); a ledger
line itself is shown by ``LedgerTransaction.memo_display`` from its stored code and params.
"""

from __future__ import annotations

from django import template
from django.utils.translation import gettext, gettext_noop

register = template.Library()


@register.filter
def ledger_memo(memo: str) -> str:
    """The memo recognised and translated (``billing.memos.memo_of_text``); unknown memos as they are."""
    from billing.memos import memo_of_text

    return memo_of_text(memo or "")


def _said(table: dict[str, str], key: str, otherwise: str) -> str:
    """``table[key]`` (a msgid) in the active language, or ``otherwise`` for a key the table lacks."""
    msgid = table.get(key or "")
    return gettext(msgid) if msgid else otherwise


# datasets.pipeline.STAGE_TABLE's stage names (and the import's own "download") in words
STAGES: dict[str, str] = {
    "download": gettext_noop("downloading"),
    "validate": gettext_noop("validating"),
    "deidentify": gettext_noop("de-identifying"),
    "deduplicate": gettext_noop("deduplicating"),
    "tokenizer": gettext_noop("training the tokenizer"),
    "shards": gettext_noop("writing training shards"),
    "statistics": gettext_noop("computing statistics"),
}


@register.filter
def stage_label(stage: str) -> str:
    """A pipeline stage's name in words of the active language ("deduplicate" -> "正在去重"); unknown as is."""
    return _said(STAGES, stage, stage or "")


# Corpus languages as recorded in a dataset version's statistics (ISO 639-1 codes).
LANGUAGES: dict[str, str] = {
    "en": gettext_noop("English"),
    "zh": gettext_noop("Chinese"),
    "und": gettext_noop("undetermined"),
}


@register.filter
def language_label(code: str) -> str:
    """A corpus language code in words of the active language ("en" -> "英语"); unknown codes as they are."""
    return _said(LANGUAGES, code, code or "")


@register.filter
def mode_label(value: str) -> str:
    """A stored rental mode by its label: ``container`` -> "Container" / "容器"; unknown values as they are."""
    from billing.choices import RentalMode

    return str(RentalMode(value).label) if value in RentalMode.values else value


# datasets.pipeline.PipelineError codes: what went wrong and what to do, in words (the error's message is the
# parser's own detail, English, shown beside it as technical text)
UPLOAD_ERRORS: dict[str, str] = {
    "encoding": gettext_noop("The file is not UTF-8 text. Save it as UTF-8 and upload it again."),
    "binary": gettext_noop("This is not a text file. Upload UTF-8 text: JSON Lines, CSV or plain text."),
    "document_too_large": gettext_noop(
        "A document is larger than the limit. Split it, or separate documents with blank lines."
    ),
    "line_too_long": gettext_noop("A line is longer than the limit. Put one document per line, or split the text."),
    "missing_column": gettext_noop("The name of the CSV file's text column is missing or not in its header."),
    "csv": gettext_noop("The CSV file could not be read as CSV."),
    "format": gettext_noop("This file format is not supported."),
    "empty": gettext_noop("No documents were found in the file."),
    "structure": gettext_noop("Some records are not in the expected form; the details name the first ones."),
    "tokenizer": gettext_noop("The tokenizer could not be trained or loaded. Retry; if it fails again, contact us."),
    "input": gettext_noop("A file this stage needs is missing. Retry the upload."),
}


@register.filter
def upload_error(code: str) -> str:
    """A pipeline error's code in words of the active language; ``""`` for an unknown code."""
    return _said(UPLOAD_ERRORS, code, "")
