"""Person names in English and German text, by context (see ``names.py`` for the rules' summary): a label
with a colon, a salutation, a sign-off with the name on the next line, an honorific, a role word, the
attendance list of minutes, or what a form says after a name (``born``, ``DOB``, ``(Tenant)``, ``is a
51-year-old``); one to four capitalised words, the honorific not included."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .name_lists import words
from .numbers import Hit

_NAME_WORD = r"(?:(?:Mc|Mac|O['’]|D['’])?[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+(?:-[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+)*)"
_EN_NAME = rf"(?P<name>{_NAME_WORD}(?: {_NAME_WORD}){{0,3}})"
_HON = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Herr|Herrn|Frau|Shri|Smt|Kumari|Sri)\.?"
_EN_CONTEXT = (
    r"(?:\b(?:Patient(?:in)?(?: name)?|Full name(?: \([^)\n]{0,40}\))?|[Nn]ame|Student name|Father's name"
    r"|Mother's name|Contact|Emergency contact|Signed|Signature|Recipient|Plaintiff|Defendant|Applicant|Claimant"
    r"|Employee|Tenant|Landlord|Owner|Cardholder|Consultant|GP|Hausarzt|Hausärztin|Referred by|Deliver to|Ship to"
    r"|Bill to|Re|Kunde|Kundin"
    r"|Ansprechpartner(?:in)?|Countersignatory|Witness|Complainant|Customer|Candidate|Present|Anwesend|Entschuldigt"
    r"|Apologies from)\s*:\s*"
    r"|\b(?:Dear|Sehr geehrte[rn]?|Liebe[rn]?|Respected)\s+"
    r"|\b(?:Yours sincerely|Yours faithfully|Yours truly|Kind regards|Best regards|Regards|Sincerely"
    r"|Mit freundlichen Grüßen|Viele Grüße|Beste Grüße|Mit kollegialen Grüßen|Signed|Thanks),?\s*\n\s*"
    r"|\b(?:patient|customer|tenant|owner|landlord|employee|cardholder|[Oo]fficer|complainant|witness|candidate"
    r"|manager|[Cc]onsultant|chaired by|referred by|seen by|signed by|spoke (?:to|with)|itinerary for|between|"
    r"Tenant|Landlord|Cardholder|Complainant|Patient|Student name|Father's name|Mother's name|[SDWC]/o)\s+"
    rf"(?={_NAME_WORD} {_NAME_WORD})|(?:^|(?<=[.\n,])|(?<=[.\n,] ))I,\s+"
    r"|Signed,\s+|\bReferral for\s+)"
)
_EN_RE = re.compile(rf"{_EN_CONTEXT}(?:{_HON}\s+)?{_EN_NAME}")
# A full name followed by what a form or statement says of a person (``Margaret Dunn, born …``).
_EN_AFTER_RE = re.compile(
    rf"(?<![\w'’-]){_NAME_WORD} {_NAME_WORD}(?: {_NAME_WORD}){{0,2}}(?=,? \(?(?:(?:born|geboren|DOB|aged|Aadhaar|SSN"
    r"|NI number|National Insurance|phone|tel|mobile|e-?mail)\b|geb\.|D\.O\.B|[SDW]/o"
    r"|(?<=\() ?(?:Owner|Tenant|Landlord|Licensee|Licensor|spouse|wife|husband|son|daughter|chair|Applicant)\)"
    r"|is an? \d{1,3}-year-old))"
)
_EN_AFTER_MARKER_RE = re.compile(
    r"born|geb\.|geboren|DOB|D\.O\.B|aged|Aadhaar|SSN|NI number|National Insurance|phone|tel|mobile|mail|[SDW]/o"
    r"|\((?:Owner|Tenant|Landlord|Licensee|Licensor|spouse|wife|husband|son|daughter|chair|Applicant)\)|year-old"
)
_EN_LIST_LABEL_RE = re.compile(r"(?:Present|Anwesend|Entschuldigt|Apologies from)\s*:")
_EN_HON_RE = re.compile(rf"\b{_HON}\s+{_EN_NAME}")
_EN_LIST_RE = re.compile(rf"(?:\s*\([^)\n]{{1,20}}\))?,\s+(?:{_HON}\s+)?{_EN_NAME}")
_EN_NOT_NAMES = words(
    """
    Sir Madam Customer Customers Patient Patients Doctor Team Member Members Friend Friends Colleague Colleagues
    All Parent Parents Reader Readers Editor The This That These Those Thank Thanks Yes No None Unknown Other
    Names Not Your Our In On At For From To With Please Claims Member Services Department Office Manager Managers
    Sehr Damen Herren Kunde Kunden Kundenservice Mitglied Mitglieder Leser Team Hospital Council Bank Revenues
    General Dear Mr Mrs Ms Miss Dr Prof Herr Frau Shri Smt Street Road Avenue Lane Drive Insurance Rent Letting
    Tax Payroll Agent Officer Surgery Practitioner Outpatients Department Contact Centre Center Mobile Email
    Telephone Phone Address Date Age Visit Signed Signature Applicant Tenant Owner Landlord Kind Best Regards
    Yours Sincerely Mit Grüßen Viele Beste Bewerbung Rechnung Protokoll Anmeldung Termin Subject Respected Station
    House Branch Admission Minutes Incident Lease Payment Progress Emergency Ship Deliver Order Total Vehicle
    Travel Employment HIPAA Visa Mastercard Amex Herrn Mx Kumari Sri Wir Ich
    Complainant Cardholder Witness Candidate Employee Student Father Mother Consultant Spouse
    """
)
_EN_TAIL_NOT = words(
    """
    Ltd Limited Inc LLC GmbH AG plc Bank Hospital Council Team Department Services Centre Center Street Road
    Avenue Lane Drive Clinic Surgery Group University College School Police Station Office Agency
    """
)


def _en_clean(name: str) -> tuple[int, int] | None:
    """``(start, end)`` within ``name`` of the part that is a person's name (words of ``_EN_NOT_NAMES`` cut
    off at either end), or None."""
    words = name.split(" ")
    start = 0
    while words and words[0] in _EN_NOT_NAMES:
        start += len(words[0]) + 1
        words = words[1:]
    while words and (words[-1] in _EN_NOT_NAMES or words[-1] in _EN_TAIL_NOT):
        if words[-1] in _EN_TAIL_NOT:
            return None
        words = words[:-1]
    if not words:
        return None
    return start, start + len(" ".join(words))


# The literal words that every context of ``_EN_RE`` starts with: found by ``str.find`` (fast), the full
# pattern is then tried only there (trying it at every position of a long text cost 1 s per MB).
_EN_KEYWORDS = words(
    """
    Patient Full name Name name Student Father's Mother's Contact Emergency Signed Signature Recipient Plaintiff
    Defendant Applicant Claimant Employee Tenant Landlord Owner Cardholder Consultant GP Hausarzt Hausärztin
    Referred Deliver Ship Bill Re Kunde Kundin Ansprechpartner Countersignatory Witness Complainant Customer
    Candidate Present Anwesend Entschuldigt Apologies Dear Sehr Liebe Respected Yours Kind Best Regards
    Sincerely Mit Viele Beste Thanks patient customer tenant owner landlord employee cardholder Officer officer
    complainant witness candidate manager consultant chaired referred seen signed spoke itinerary between S/o
    D/o W/o C/o I, Referral
    """
)


def _context_matches(work: str) -> Iterator[re.Match[str]]:
    starts: set[int] = set()
    for word in _EN_KEYWORDS:
        i = work.find(word)
        while i >= 0:
            starts.add(i)
            i = work.find(word, i + 1)
    end = -1
    for i in sorted(starts):
        if i < end:
            continue
        m = _EN_RE.match(work, i)
        if m is not None:
            end = m.end()
            yield m


def _role_only(m: re.Match[str]) -> bool:
    """Whether the context of an ``_EN_RE`` match is a bare role word (no colon, salutation, sign-off or
    honorific), after which only a name of two or more words counts."""
    ctx = m.string[m.start() : m.start("name")]
    return not (":" in ctx or "\n" in ctx or _SALUTATION_RE.match(ctx) or _HON_RE.search(ctx))


_SALUTATION_RE = re.compile(r"\s*(?:Dear|Sehr geehrte|Liebe|Respected|I,|Signed,)")
_HON_RE = re.compile(rf"\b{_HON}\s+$")


def english_names(work: str) -> Iterator[Hit]:
    done = -1
    for marker in _EN_AFTER_MARKER_RE.finditer(work):  # the full pattern only just before its markers
        lo = max(0, marker.start() - 80, done)
        for m in _EN_AFTER_RE.finditer(work, lo, marker.end()):
            span = _en_clean(m.group())
            if span is not None and " " in m.group()[span[0] : span[1]]:
                yield Hit("NAME", m.start() + span[0], m.start() + span[1], "name:en-described", 0.8)
            done = max(done, m.end())
    for pattern, rule in ((_EN_RE, "name:en-context"), (_EN_HON_RE, "name:en-honorific")):
        for m in _context_matches(work) if pattern is _EN_RE else pattern.finditer(work):
            span = _en_clean(m.group("name"))
            if span is None:
                continue
            if pattern is _EN_RE and " " not in m.group("name")[span[0] : span[1]] and _role_only(m):
                continue  # "Patient Registry These …": a role word needs a full name after it
            s = m.start("name") + span[0]
            yield Hit("NAME", s, m.start("name") + span[1], rule, 0.85)
            if _EN_LIST_LABEL_RE.match(work, m.start()):  # a list: "Present: A (chair), B, C"
                pos = m.end("name")
                while (n := _EN_LIST_RE.match(work, pos)) is not None:
                    span = _en_clean(n.group("name"))
                    if span is None:
                        break
                    yield Hit("NAME", n.start("name") + span[0], n.start("name") + span[1], "name:en-list", 0.8)
                    pos = n.end("name")
