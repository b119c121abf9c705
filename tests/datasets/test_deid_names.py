"""People's names found by the tagger and the evidence around them, and the words that only look like
names (issue 28). The held-out set (``test_deid_heldout.py``) scores them in bulk; these pin the kinds."""

from __future__ import annotations

import pytest

from datasets.deid import deidentify, find_pii


def _names(text: str) -> list[str]:
    return [f.value for f in find_pii(text) if f.type == "NAME"]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("老师王帆说明天不上课。", ["王帆"]),
        ("车主华桂珍的电话是13812345678。", ["华桂珍"]),
        ("注册人谢坤，旅客李鑫，已登记。", ["谢坤", "李鑫"]),
        ("用户王淑兰反馈订单未到。", ["王淑兰"]),
        ("今日主任医师薛海查房，患者顾峰神志清。", ["薛海", "顾峰"]),
        ("快递员叶洁态度差，已回访。", ["叶洁"]),
        ("证人许海燕出庭作证称，当天下雨。", ["许海燕"]),
        ("面试官姚文、陈雷，候选人电话1712345678。", ["姚文", "陈雷"]),
        ("报名找秦勇18620334471，场地费每人30元。", ["秦勇"]),
        ("我帮你约了马杨医生。", ["马杨"]),
        ("欧阳，男，1998年10月5日出生。", ["欧阳"]),
        ("考勤异常：宋婷于2020年11月11日 01:22打卡。", ["宋婷"]),
        ("工资条｜莫小贝｜基本工资8000.00", ["莫小贝"]),
        ("委托人叶超现委托某某科技有限公司律师蔡晨为诉讼代理人。", ["叶超", "蔡晨"]),
    ],
    ids=[
        "teacher",
        "owner",
        "registrant-traveller",
        "user",
        "doctor-patient",
        "courier",
        "weak-surname-three-characters",
        "list",
        "next-to-a-phone",
        "before-a-title",
        "record-head",
        "record-head-with-a-date",
        "table-cell",
        "before-an-organisation-that-is-not-the-name",
    ],
)
def test_chinese_names_in_ordinary_sentences(text: str, names: list[str]) -> None:
    assert _names(text) == names


def test_a_chat_export_names_every_speaker_and_keeps_the_times() -> None:
    text = (
        "2024-03-15 14:02:11 陈静\n老公，妈刚才打电话说明天来\n"
        "2024-03-15 14:05:37 周宇航\n好，明天几点？我14:30下班\n"
        "[2024-03-16 09:15] 梁志: 收到\n"
        "【20250407 175536】韩雷：医生说下周复查"
    )
    new, counts = deidentify(text)
    assert counts == {"NAME": 4}
    assert new == (
        "2024-03-15 14:02:11 [NAME]\n老公，妈刚才打电话说明天来\n"
        "2024-03-15 14:05:37 [NAME]\n好，明天几点？我14:30下班\n"
        "[2024-03-16 09:15] [NAME]: 收到\n"
        "【20250407 175536】[NAME]：医生说下周复查"
    )


def test_a_name_found_once_is_replaced_everywhere_in_the_text() -> None:
    text = "客户：潘海燕（VIP）\n内容：客户反映潘海燕名下信用卡账单有误。"
    assert _names(text) == ["潘海燕", "潘海燕"]


@pytest.mark.parametrize(
    "text",
    [
        "经审判长许可，公诉人可以再次向证人发问。",
        "申请执行人因被执行人迟延履行遭受损害的，可以向执行法院申请赔偿。",
        "坚持以马克思列宁主义、毛泽东思想、邓小平理论为指导。",
        "中华人民共和国会计法",
        "上海市浦东新区促进张江生物医药产业创新高地建设规定",
        "应当向中国主管机关提出申请。",
        "被告人和正在服刑的罪犯，如实供述司法机关还未掌握的罪行。",
        "配合学校开发适合不同学段学生的校外实践教育课程。",
        "承载乘客游乐的设施，包括示范区先行启动区金泽镇。",
        "甲方：万迅电脑传媒有限公司",
        "张三（身份证 440308199003071235）",
        "请 @张伟 查看",
        "王老师：收到，注意休息。李某于次日离开。",
    ],
    ids=[
        "dictionary-nr-word",
        "dictionary-word-after-a-role",
        "public-figures-in-citations",
        "inside-a-name-of-law",
        "a-place",
        "a-preposition-as-surname-before-a-title",
        "a-function-word-as-surname",
        "a-role-word-inside-other-words",
        "a-word-after-a-role-and-a-town",
        "an-organisation",
        "a-placeholder-name",
        "an-account-handle",
        "surname-and-title-and-pseudonym",
    ],
)
def test_words_that_only_look_like_names_stay(text: str) -> None:
    assert _names(text) == []


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Dear Mrs Pollard,\n\nFurther to our call", ["Pollard"]),
        ("Dear Mr. Moore,\nWe have received", ["Moore"]),
        ("Full name: Callum O'Brien\nMobile:", ["Callum O'Brien"]),
        ("Sir, I, Vansha Kadakia, S/o Krishnan Iyer, hold an account", ["Vansha Kadakia", "Krishnan Iyer"]),
        ("between Ravi Rao (Owner) and Amruta Gill (Tenant), mobile", ["Ravi Rao", "Amruta Gill"]),
        ("Witness statement of Margaret Dunn, born 4 June 1958.", ["Margaret Dunn"]),
        ("Progress note: Julian Farley is a 51-year-old seen for follow-up.", ["Julian Farley"]),
        ("Sehr geehrte Frau Schäfer,\nwir bestätigen", ["Schäfer"]),
        ("Wir berichten über Herrn Jürgen Wolff, geb. 17.11.1949, der", ["Jürgen Wolff"]),
        (
            "Anwesend: Egbert Faust, Hakan Hande, Zita Bien. Entschuldigt: Frau Scheuermann.",
            ["Egbert Faust", "Hakan Hande", "Zita Bien", "Scheuermann"],
        ),
        ("Mit freundlichen Grüßen\nSabine Hoffmann-Reiter", ["Sabine Hoffmann-Reiter"]),
    ],
    ids=[
        "salutation-honorific",
        "honorific-with-dot",
        "apostrophe",
        "first-person-and-son-of",
        "parties-of-an-agreement",
        "described-after",
        "age-after",
        "german-salutation",
        "german-honorific-and-birth",
        "attendance-list",
        "sign-off-next-line",
    ],
)
def test_english_and_german_names_by_context(text: str, names: list[str]) -> None:
    assert _names(text) == names


def test_english_medical_prose_keeps_its_capitalised_words() -> None:
    text = (
        "Stage I, Stage II, Stage III. Neurofibromatosis type I, Li-Fraumeni syndrome, Turcot syndrome. "
        "The library offers a Patient Guide to Scoliosis and a JAMA Patient Page: Retinal Detachment."
    )
    assert _names(text) == []


def test_the_tagger_is_loaded_once_per_process() -> None:
    from datasets.deid import names

    find_pii("车主华桂珍的电话")
    find_pii("旅客李鑫")
    assert names._tagger.cache_info().currsize == 1
    assert names._tagger.cache_info().misses <= 1
