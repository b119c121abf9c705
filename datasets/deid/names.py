"""Person names in Chinese, English and German text: a statistical tagger's candidates weighed with the
evidence of labels, roles, titles, speakers and neighbouring identifiers.

**The tagger.** ``rjieba`` (PyPI; the Python binding of ``jieba-rs``, jieba's Rust port, MIT): its
part-of-speech tagger marks person names ``nr`` / ``nrfg``, from jieba's dictionary (built into the wheel)
and, for words not in it, from jieba's HMM; nothing is downloaded, ever. Loaded once per process on first
use: 0.3–0.4 s on a quiet machine (1.4 s under load), +39 MiB of memory (peak RSS of the de-identify stage
25 → 64 MiB). Cost, measured on the legal corpus (26.7 MB, 2 shared cores, ``benchmarks/deid_bench.py`` and
CPU seconds of the stages run back to back): the tagger alone reads ~4 MB/s; ``find_pii`` went from
2.5–7.0 to 0.9–1.7 MB/s (wall time; load 6–8), the de-identify stage from 3.5 to 10.9 CPU seconds, the
upload pipeline (validate + de-identify + tokenize/shard) from 16.7 to 24.0 CPU seconds (x1.44).
Rejected: jieba's own ``posseg`` (pure Python, measured 0.13 MB/s; same dictionary and tags); Faker's name
tables (they fill the held-out evaluation set, ``tests/datasets/deid_heldout``: a detector built on them would
be scored on its own list); ``nameparser`` (splits a name already found, finds none). Not tried, by their
documentation: ``pkuseg``/``spacy-pkuseg`` (tagging models fetched at first use) and ``names-dataset`` (its
tables take gigabytes of memory once loaded).

**What the tag is worth.** jieba's dictionary tags tens of thousands of entries ``nr``, among them everyday
words (``许可``, ``陈述``, ``迟延``, ``文明``, ``申请人``) and public figures (``毛泽东``, ``邓小平``); its HMM finds
unknown names (``华桂珍``, ``叶洁``) but also ``师德``, ``张江``. So a candidate (a surname of ``SURNAMES`` and one
or two given-name characters; compound surnames too) is taken:

- with **evidence** of a person: after a label or role word (``姓名：``, ``原告``, ``车主``, ``注册人``,
  ``老师``, ``旅客`` …), before a title (``医生``, ``老师``, ``先生``, ``主任`` …), as the speaker of a chat
  line (``2024-03-15 14:02 陈静：…``), next to an identifier already found (``秦勇18620334471``), at the head of
  a record (``龙阳，工号…``, ``高远，男，``, ``宋婷于2020年…``), in a table cell of its own, before a verb of
  speech or record (``说``, ``反馈``, ``出庭`` …) or in a list with a name found so (``姚文、陈雷``) — when the
  tagger tags it a name or its given name is made of given-name characters (``NAME_CHARS``); a word of the
  dictionary (``迟延``, ``游乐``; also ``张飞``) only as a field's value, before punctuation;
- **without** evidence only when the tagger's HMM found it (no dictionary word), its given name is made
  of given-name characters, what follows may follow a name, no organisation or place word follows, and a
  two-character one stands as a clause of its own.

A name found with strong evidence (a colon label, a speaker line, a record head, next to an identifier) is
replaced wherever else it stands in the same text. Precision guards: words that start with a surname
character and are not names (``_NOT_NAMES``); surnames that are also function words (``_WEAK_SURNAMES``:
``许可``, ``和解``, ``向中国``) need more; places by their last character (``金泽镇``); organisation names
followed word by word (``万迅电脑传媒有限公司``); pseudonyms (``张某``), placeholders (``张三``) and account
handles (``@张伟``) stay; public figures named in citations of law (``PUBLIC_FIGURES``: ``毛泽东思想``,
``邓小平理论``) are never replaced — an organisation's own allow-list (``DeidOptions.allow``) keeps others.
Long lines are tagged in pieces of at most ``_SEGMENT`` characters, cut after a sentence end.

**English and German** names are found by context (a label with a colon, a salutation, a sign-off with
the name on the next line, an honorific ``Mr``/``Mrs``/``Dr``/``Herr``/``Frau``/``Shri`` …, a role word
``patient``/``tenant``/``owner``/``Officer`` …, the attendance list of minutes) followed by one to four
capitalised words (``O'Brien``, ``Hoffmann-Reiter``, ``Jürgen``); the honorific is not part of the name.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import cache
from itertools import accumulate

from .name_lists import (
    COMPOUND_SURNAMES,
    NAME_CHARS,
    PUBLIC_FIGURES,
    SINGLE_SURNAMES,
)
from .name_lists import FIELD_LABELS as _FIELD_LABELS
from .name_lists import LIGHT_ROLES as _LIGHT_ROLES
from .name_lists import NOT_NAMES as _NOT_NAMES
from .name_lists import PLACEHOLDER_NAMES as _PLACEHOLDER_NAMES
from .name_lists import ROLE_WORDS as _ROLE_WORDS
from .name_lists import TITLES as _TITLES
from .name_lists import WEAK_SURNAMES as _WEAK_SURNAMES
from .names_en import english_names
from .numbers import Hit
from .times import datetime_spans

_STOP = frozenset(
    "诉述辩与和及等的于因向称系是为在将对被已应均并以由从自男女性年岁住现身电手号籍族出同生，。、；：:;,.!?！？（）()"
    "「」『』“”\"'《》<>[]【】 \t\r\n/\\|-—·…之其该此某\ue000"
)
# Single surnames that are also everyday function words or verb starts (和正在, 许可, 向法庭, 时报告 …).
_TITLE_RE = re.compile("|".join(sorted(_TITLES, key=len, reverse=True)))
_ROLES_RE = re.compile(
    "(?:" + "|".join(sorted(_FIELD_LABELS | _ROLE_WORDS, key=len, reverse=True)) + r")(?:[（(](?:签名|签字|盖章)[)）])?"
)
# What follows a name at the head of a record or in a sentence about the person.
_AFTER_NAME_RE = re.compile(
    r"[，,]\s*(?:男|女|工号|身份证|性别|出生|现住|住|汉族|年龄|电话|手机|联系|证件|护照|邮箱|职务|岗位|\d{1,3}岁)"
    r"|(?:说|表示|称|反映|反馈|同意|来电|致电|签字|签名|到庭|出庭|作证|入职|离职|打卡|回复|请假|报名|确认|提交|"
    r"已转|收到|发来|打电话|的电话|的手机|的身份证|的银行卡|名下|本人|体温|神志|术后)"
)
# An organisation or place word right after a candidate: the candidate is part of its name.
_ORG_AFTER_RE = re.compile(
    r"(?:市|县|区|省|镇|乡|村|路|街|道|巷|里|河|湖|山|岛|港|湾|州|城|园|楼|馆|站|局|厅|委|所|院|部|处|科|队|店|厂|场"
    r"|中心|公司|集团|银行|医院|大学|学院|中学|小学|学校|协会|有限|股份|律师事务所|事务所|酒店|大厦|广场|宾馆|工作室|"
    r"研究|实验|科技|电子|信息|传媒|网络|软件|国际|贸易|文化|教育|基金|资本|控股|证券|保险)"
)
_CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")
_CELL_RE = re.compile(r"(?:^|(?<=[｜|\t]))[ \u3000]*(?P<cell>[\u4e00-\u9fff]{2,4})[ \u3000]*(?=[｜|\t]|$)")
_RECORD_HEAD_RE = re.compile(r"(?:^|(?<=[：:。；;\t|｜]))\s*")
_RECORD_AFTER_RE = re.compile(
    r"[，,（(]\s*(?:男|女|工号|身份证|性别|出生|现住|汉族|年龄|电话|手机|证件|护照|个人编号|\d{1,3}岁|\d{4}年\d{1,2}月)"
    r"|于\s?\d|将"
)


def _surname_len(s: str) -> int:
    """Length of the surname ``s`` starts with (2 for compound, 1 for single), 0 for none. A compound
    surname with nothing after it is read as a single surname and a given name (``欧阳``: 欧 + 阳)."""
    if s[:2] in COMPOUND_SURNAMES and len(s) > 2:
        return 2
    return 1 if s[:1] in SINGLE_SURNAMES else 0


def _shape_ok(cand: str) -> bool:
    """A surname and one or two given-name characters, all Han, not a pseudonym or a known word."""
    sl = _surname_len(cand)
    return (
        bool(sl)
        and 1 <= len(cand) - sl <= 2
        and all("\u4e00" <= c <= "\u9fff" for c in cand)
        and not any(c in _STOP for c in cand[sl:])
        and cand not in _NOT_NAMES
        and (cand[:2] not in _NOT_NAMES or (len(cand) == 3 and _given_ok(cand)))
        and cand not in PUBLIC_FIGURES
        and cand not in _PLACEHOLDER_NAMES
        and _TITLE_RE.match(cand, sl) is None  # 王老师, 李医生: a surname and a title
        and cand[-1] not in "湖镇村乡县市区省庄屯寨湾岛港桥路街"  # 邱家湖, 金泽镇: places
    )


def _given_ok(cand: str) -> bool:
    return all(c in NAME_CHARS for c in cand[_surname_len(cand) :])


@cache
def _tagger() -> Callable[[str], list[tuple[str, str]]]:
    """``rjieba.tag`` (its dictionary is loaded on the first import, once per process)."""
    import rjieba

    rjieba.tag("预热")
    return rjieba.tag


@cache
def _in_dictionary() -> Callable[[str], bool]:
    import rjieba

    return rjieba.has_word


class _Line:
    """One line of text with the tagger's tokens: ``bounds`` (token starts and ends, line offsets) and
    ``nr`` (``{start: end}`` of tokens tagged a person name)."""

    __slots__ = ("_ends", "bounds", "nr", "nr_oov", "offset", "tag_at", "tag_before", "text")

    def __init__(self, text: str, offset: int) -> None:
        self.text, self.offset = text, offset
        # The lone surrogate JSON may carry ("\udc80") is no Unicode the tagger (Rust) takes: U+FFFD for it,
        # one character for one, so offsets hold.
        tagged = _SURROGATE_RE.sub("\ufffd", text) if _SURROGATE_RE.search(text) else text
        tokens = _tagger()(tagged)
        starts = list(accumulate((len(w) for w, _ in tokens), initial=0))
        tags = [t for _, t in tokens]
        self.bounds: set[int] = set(starts)
        self.tag_at: dict[int, str] = dict(zip(starts, tags, strict=False))  # the tag of the token starting there
        self.tag_before: dict[int, str] = dict(zip(starts[1:], tags, strict=True))  # ... and of the one ending there
        self._ends: list[int] | None = None  # sorted bounds, made on first use
        self.nr: dict[int, int] = {}
        self.nr_oov: set[int] = set()
        has_word = _in_dictionary()
        for k, (word, tag) in enumerate(tokens):
            if (tag == "nr" or tag == "nrfg") and _shape_ok(word):
                # A dictionary word tagged nr counts only with a given name of given-name characters: the
                # dictionary tags everyday words nr (许可, 牟利, 陈述).
                oov = not has_word(word)
                if oov or _given_ok(word):
                    self.nr[starts[k]] = starts[k + 1]
                if oov:
                    self.nr_oov.add(starts[k])

    def boundary(self, i: int, *, side: str) -> bool:
        """Whether a name may start (``side="start"``) or end (``"end"``) at ``i``: a token boundary, or the
        character outside the name is punctuation, a function word or not Han (the tagger glues an unknown
        name to its neighbours: ``人谢|坤``, ``叶莉于``)."""
        if i in self.bounds or i <= 0 or i >= len(self.text):
            return True
        outside = self.text[i - 1] if side == "start" else self.text[i]
        if side == "end" and (_AFTER_NAME_RE.match(self.text, i) or _TITLE_RE.match(self.text, i)):
            return True  # 李芳|名下: the tagger read 芳名
        return outside in _CLOSING or outside in _CLAUSE_END or not _CJK_CHAR.match(outside)

    def org_follows(self, e: int) -> bool:
        """An organisation's name continues after ``e`` (``万迅电脑传媒有限公司``): an organisation word in
        the words that follow, up to a verb, preposition, conjunction or punctuation (``叶超现委托…公司``)."""
        if self._ends is None:
            self._ends = sorted(self.bounds)
        ends = self._ends
        i, run = e, ""
        while i < len(self.text) and len(run) < 12:
            k = bisect_right(ends, i)
            nxt = ends[k] if k < len(ends) else len(self.text)
            tag = self.tag_at.get(i, "n")
            word = self.text[i:nxt]
            if tag[:1] in ("p", "c", "u", "x", "m") or not _CJK_CHAR.match(word[:1]) or word[0] in _CLOSING:
                break
            run += word
            i = nxt
        return _ORG_WORDS_RE.search(run) is not None

    def follower_ok(self, e: int) -> bool:
        """What follows ``e`` may follow a person's name: punctuation, a function word, a verb, a title."""
        if e >= len(self.text) or self.text[e] in _CLAUSE_END or self.text[e] in "的和与及在于等也都就还又说":
            return True
        return self.tag_at.get(e, "").startswith("v") or _TITLE_RE.match(self.text, e) is not None

    def candidate_at(self, i: int, *, loose: bool = False) -> int:
        """End of the most plausible name starting at ``i`` (0 for none): the tagger's name token, else the
        longest surname + given-name characters ending at a token boundary (``loose``: any characters,
        after a colon label)."""
        nr_end = self.nr.get(i, 0)
        if nr_end and (
            nr_end >= len(self.text) or self.text[nr_end] in _STOP or not _given_ok(self.text[i : nr_end + 1])
        ):
            return nr_end  # the tagger's name ends cleanly (or the next character is no given name's)
        head = self.text[i : i + 3]
        readings = [2] if head[:2] in COMPOUND_SURNAMES else []
        readings += [1] if head[:1] in SINGLE_SURNAMES else []
        for n in [r + g for r in readings for g in (2, 1)]:
            cand = self.text[i : i + n]
            if len(cand) == n and _shape_ok(cand) and (loose or _given_ok(cand)) and self.boundary(i + n, side="end"):
                rest = self.text[i + n : i + n + 6]
                if not _ORG_AFTER_RE.match(rest) or _TITLE_RE.match(rest):
                    return max(i + n, nr_end)
        return nr_end

    def candidate_ending(self, e: int) -> int:
        """Start of the most plausible name ending at ``e`` (-1 for none)."""
        for s, end in self.nr.items():
            if end == e:
                return s
        for n in (4, 3, 2):
            s = e - n
            if s < 0:
                continue
            cand = self.text[s:e]
            if (
                _shape_ok(cand)
                and _given_ok(cand)
                and self.boundary(s, side="start")
                and (n < 4 or cand[:2] in COMPOUND_SURNAMES)
            ):
                return s
        return -1


# Function words after which a name has ended (的, 于, 与, 诉, 现 委托 …).
_CLOSING = frozenset("的于在与和及诉述辩等称向对因为是系被已将现就")
_CLAUSE_END = frozenset("，,。；;：:、（(）)｜|\n\r\t 　\ue000")


def _accept(line: _Line, s: int, e: int, *, strong: bool, role: bool = False) -> bool:
    """Whether the candidate ``line.text[s:e]``, which has evidence of a person, is taken: ``strong`` (a
    colon label, a speaker line) always; otherwise it must close (punctuation, 的/于, a title, a verb of
    speech or record …) unless the tagger's HMM found it, or it follows a ``role`` word and is no word of
    the dictionary (``快递员叶洁态度差``; but ``被执行人迟延履行``)."""
    cand = line.text[s:e]
    if not _shape_ok(cand) or line.org_follows(e) or line.text[s - 1 : s] == "@":
        return False  # @张伟: an account's handle
    tagged = line.nr.get(s) == e
    if strong:
        return True
    closed = (
        e >= len(line.text)
        or line.text[e] in _CLAUSE_END
        or line.text[e] in _CLOSING
        or _TITLE_RE.match(line.text, e) is not None
        or _AFTER_NAME_RE.match(line.text, e) is not None
    )
    weak = cand[0] in _WEAK_SURNAMES and _surname_len(cand) == 1
    if weak and len(cand) == 3 and _given_ok(cand) and (tagged or not _in_dictionary()(cand[1:])):
        weak = False  # 诸秀云, 许海燕: two given-name characters leave no everyday word (but 向中国)
    if weak:  # 和正在, 于是, 来源: tagged or after a role, closed, not before 的/于/在
        ok = tagged or (role and _given_ok(cand) and not _in_dictionary()(cand))
        return ok and closed and line.text[e : e + 1] not in ("的", "于", "在")
    if _in_dictionary()(cand) and not (tagged and len(cand) == 3):
        # A word of the dictionary (迟延, 游乐, 文书, but also 张飞, 苏丹) is a name only as a field's value:
        # before a comma, a full stop, a bracket or an identifier (车主张飞，; not 收货人迟延、拒绝, 乘客游乐的).
        return e >= len(line.text) or line.text[e] in "，,。；;（(）):：｜|\n\t \ue000"
    if s in line.nr_oov and tagged:
        return role or closed or line.follower_ok(e)  # a name the tagger's HMM found: any word a name can precede
    if role and _given_ok(cand):
        return True  # after a role word, no dictionary word: 快递员叶洁态度差
    return (tagged or _given_ok(cand)) and closed


_ORG_WORDS_RE = re.compile(
    r"有限|股份|公司|集团|银行|医院|大学|学院|事务所|研究院|研究所|委员会|政府|法院|检察院|派出所|看守所|协会|商会|基金会"
)


def _speaker_spans(line: _Line) -> Iterator[tuple[int, int]]:
    """A chat line's speaker: the line starts (after a timestamp, brackets or a tag) with a name that is
    followed by a colon, the end of the line or a timestamp."""
    text = line.text
    if not text[:1].isdigit() and text[:1] not in "[【(（" and not _CJK_CHAR.match(text[:1]):
        return
    stamps = datetime_spans(text[:40]) if text[:1].isdigit() or text[1:2].isdigit() else []
    head = 0
    if stamps and stamps[0][0] <= 2:
        head = stamps[0][1]
        while head < len(text) and text[head] in " \t]】)）":
            head += 1
    elif text[:1] in "[【":
        head = 1
    if head >= len(text) or not _CJK_CHAR.match(text[head]):
        return
    e = line.candidate_at(head)
    if not e:
        return
    rest = text[e:]
    if rest[:1] in ":：" or not rest.strip() or (rest[:1] == " " and datetime_spans(rest[:30])[:1]):
        yield head, e


def _two_char_alone(raw: str, s: int, e: int) -> bool:
    """A two-character name without any other evidence stands as a clause of its own: after a clause start
    and before a clause end, a title or a verb of speech (``…一下邓超群和孟婷``, not ``加强师德修养``)."""
    before_ok = s == 0 or (raw[s - 1] in _CLAUSE_END and raw[s - 1] != "、") or raw[s - 1] in "和与及"
    after_ok = e >= len(raw) or (raw[e] in _CLAUSE_END and raw[e] != "、")
    after_ok = after_ok or bool(_AFTER_NAME_RE.match(raw, e) or _TITLE_RE.match(raw, e))
    return before_ok and after_ok


# Rules whose names are looked for again in the rest of the text (strong evidence only).
_PROPAGATED = frozenset({"name:label", "name:speaker", "name:record-head", "name:next-to-identifier"})


_MASK_RUN_RE = re.compile("\ue000+")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SEGMENT = 2000  # characters the tagger reads at once: a very long line is cut after a sentence end
_SENTENCE_END_RE = re.compile(r"[。！？；!?;]")


def _segments(work: str) -> Iterator[tuple[str, int]]:
    """``(text, offset)`` of every line of ``work`` holding Han characters, a line longer than ``_SEGMENT``
    cut after its last sentence end within each ``_SEGMENT`` characters (so memory stays bounded)."""
    offset = 0
    for raw in work.split("\n"):
        if _CJK_CHAR.search(raw):
            start = 0
            while len(raw) - start > _SEGMENT:
                window = raw[start : start + _SEGMENT]
                ends = [m.end() for m in _SENTENCE_END_RE.finditer(window)]
                cut = start + (ends[-1] if ends else _SEGMENT)
                yield raw[start:cut], offset + start
                start = cut
            yield raw[start:], offset + start
        offset += len(raw) + 1


def _chinese_names(work: str) -> Iterator[Hit]:
    hits: list[Hit] = []
    names: set[str] = set()
    lines: list[tuple[str, int]] = []
    for raw, offset in _segments(work):
        line = _Line(raw, offset)
        found: dict[int, tuple[int, str, float]] = {}

        def keep(s: int, e: int, rule: str, confidence: float, _found: dict = found) -> None:
            if s not in _found or _found[s][0] < e:
                _found[s] = (e, rule, confidence)

        for s, e in _speaker_spans(line):
            if _accept(line, s, e, strong=True):
                keep(s, e, "name:speaker", 0.9)
        for m in _ROLES_RE.finditer(raw):
            i = m.end()
            colon = False
            while i < len(raw) and raw[i] in " \t:：\u3000)）" and i - m.end() < 3:
                colon = colon or raw[i] in ":："
                i += 1
            role = m.group()
            e = line.candidate_at(i, loose=colon and role in _FIELD_LABELS | _ROLE_WORDS - _LIGHT_ROLES)
            if not e:
                continue
            start_ok = m.start() in line.bounds or not _CJK_CHAR.match(raw[m.start() - 1])
            if not start_ok and not colon:
                continue
            # The role ends a word, or the name does (快递|员叶洁|态度: the tagger glued 员 to the name; but
            # 不|同学|段|学生: 段学 would cut 学生).
            end_ok = (
                m.end() in line.bounds or i in line.nr or e in line.bounds or e >= len(raw) or raw[e] in _CLAUSE_END
            )
            if not end_ok and not colon:
                continue  # 不同学段学生: the role word is part of other words
            if (
                role in _LIGHT_ROLES
                and i not in line.nr_oov
                and not ((e >= len(raw) or raw[e] in _CLAUSE_END) and not _in_dictionary()(raw[i:e]))
            ):
                continue  # 感谢/通知/转给 …: a name the tagger's HMM found, or no word before a clause end
            if not colon and role not in _LIGHT_ROLES and line.tag_before.get(m.end(), "n")[:1] in ("v", "p", "d"):
                continue  # the role word is a verb here: 销售牟利, 审核通过
            if _accept(line, i, e, strong=colon and role not in _LIGHT_ROLES, role=role not in _LIGHT_ROLES):
                keep(i, e, "name:label" if colon else "name:role", 0.9 if colon else 0.85)
        for m in _RECORD_HEAD_RE.finditer(raw):  # the head of a record: 高远，男，… / 龙阳，工号…
            i = m.end()
            e = line.candidate_at(i)
            if e and _RECORD_AFTER_RE.match(raw, e) and _accept(line, i, e, strong=False):
                keep(i, e, "name:record-head", 0.85)
        for m in _CELL_RE.finditer(raw):  # a table cell holding a name alone: ｜莫小贝｜
            i = m.start("cell")
            e = line.candidate_at(i)
            if e == m.end("cell") and _accept(line, i, e, strong=False):
                keep(i, e, "name:cell", 0.8)
        for m in _TITLE_RE.finditer(raw):
            s = line.candidate_ending(m.start())
            if s >= 0 and _accept(line, s, m.start(), strong=False):
                keep(s, m.start(), "name:title", 0.85)
        for run in _MASK_RUN_RE.finditer(raw):  # next to an identifier already found (masked)
            j = run.start()
            while j > 0 and raw[j - 1] in " （(":
                j -= 1
            s = line.candidate_ending(j)
            if s >= 0 and _accept(line, s, j, strong=False):
                keep(s, j, "name:next-to-identifier", 0.85)
        for s, e in line.nr.items():
            if s in found:
                continue
            if _AFTER_NAME_RE.match(raw, e) and line.boundary(s, side="start") and _accept(line, s, e, strong=False):
                keep(s, e, "name:tagger+context", 0.85)
            elif (
                s in line.nr_oov
                and _given_ok(raw[s:e])
                and raw[s] not in _WEAK_SURNAMES
                and line.follower_ok(e)
                and (e - s >= 3 or _two_char_alone(raw, s, e))
                and raw[s - 1 : s] != "@"
                and not _ORG_AFTER_RE.match(raw, e)
                and not _TITLE_RE.match(raw, e - 1)
                and not line.org_follows(e)
            ):
                keep(s, e, "name:tagger", 0.75)
        # names listed with one already found: 姚文、陈雷 / 王芳和李娜
        changed = True
        while changed:
            changed = False
            for e, _, _ in sorted(found.values()):
                if e < len(raw) and raw[e] in "、和与及,，":
                    nxt = line.candidate_at(e + 1)
                    if nxt and e + 1 not in found and _accept(line, e + 1, nxt, strong=False):
                        keep(e + 1, nxt, "name:list", 0.8)
                        changed = True
        for s in sorted(found):
            e, rule, confidence = found[s]
            hits.append(Hit("NAME", offset + s, offset + e, rule, confidence))
            if rule in _PROPAGATED:
                names.add(raw[s:e])
        lines.append((raw, offset))
    # A name found once is the same person's name wherever else it stands in the text (at a word edge).
    taken = {h.start for h in hits}
    for raw, offset in lines if names else ():
        present = [name for name in names if name in raw]
        if not present:
            continue
        line = _Line(raw, offset)  # tagged again: only the segments that hold a name found elsewhere
        for name in present:
            pos = line.text.find(name)
            while pos >= 0:
                end = pos + len(name)
                if (
                    line.offset + pos not in taken
                    and line.boundary(pos, side="start")
                    and line.boundary(end, side="end")
                    and not line.org_follows(end)
                ):
                    hits.append(Hit("NAME", line.offset + pos, line.offset + end, "name:same-name", 0.8))
                pos = line.text.find(name, end)
    hits.sort(key=lambda h: (h.start, -h.end))
    last = -1
    for h in hits:
        if h.start >= last:
            yield h
            last = h.end


def detect_name(work: str) -> Iterator[Hit]:
    """Person names (see the module docstring): Chinese by the tagger and evidence, English and German
    by context."""
    if _CJK_CHAR.search(work) is not None:
        yield from _chinese_names(work)
    if any(c.isupper() for c in work[:1]) or re.search(r"[A-Z]", work) is not None:
        yield from english_names(work)
