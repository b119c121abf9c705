"""Detectors of identifiers written in words: person names, postal addresses, dates of birth.

Names are found by context, never in running text alone: a label (``姓名``, ``联系人``, ``收件人``, legal
party roles ``原告``/``被告``/``申请人``/``委托代理人``/``法定代表人`` …, ``签名``, with or without a colon),
a salutation (``尊敬的``, ``Dear``) or an honorific after the name (``先生``/``女士``/``同志``/``小姐``), and
the candidate must start with a surname of ``SURNAMES`` (single and compound). In statutes the role
labels are ordinary words (``经审判长许可``, ``精神障碍患者康复``), so a label without a colon counts only
at a clause start, before a clause end (punctuation, 诉, 与, 于 …), with given-name characters from
``NAME_CHARS`` and not after a surname that is also a function word (和, 向, 许 …). jieba's ``nr`` tag was
measured before and rejected (0.2 MB/s; it tagged 经审查, 许可, 陈述 on the legal corpus).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .numbers import _DIGIT, Hit

# The common single surnames (about 95 % of the population by the 2020 census lists) and the compound ones.
SINGLE_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
    "姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温康施"
    "文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷"
    "盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷"
    "晏席卫米柏宗瞿桂全佟应臧闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
)
COMPOUND_SURNAMES = (
    "欧阳",
    "司马",
    "诸葛",
    "上官",
    "东方",
    "皇甫",
    "尉迟",
    "公孙",
    "慕容",
    "令狐",
    "司徒",
    "夏侯",
    "长孙",
    "宇文",
    "端木",
    "独孤",
    "南宫",
    "西门",
    "呼延",
    "轩辕",
    "澹台",
    "百里",
    "钟离",
    "万俟",
    "闻人",
)
SURNAMES = SINGLE_SURNAMES | frozenset(COMPOUND_SURNAMES)

# Characters that end a name: function words, punctuation and the first characters of what usually
# follows a name in a record (性别, 男/女, 出生, 住, 身份证 …).
_STOP = frozenset(
    "诉述辩与和及等的于因向称系是为在将对被已应均并以由从自男女性年岁住现身电手号籍族出同生，。、；：:;,.!?！？（）()"
    "「」『』“”\"'《》<>[]【】 \t\r\n/\\|-—·…之其该此某"
)
# Two-character words that start with a surname character and follow a label in ordinary prose.
_NOT_NAMES = frozenset(
    {
        "方面",
        "方式",
        "方法",
        "高度",
        "周年",
        "王国",
        "黄金",
        "金额",
        "林业",
        "安全",
        "向上",
        "常委",
        "文件",
        "明确",
        "成立",
        "成本",
        "时间",
        "时候",
        "全部",
        "全体",
        "关于",
        "关系",
        "应当",
        "项目",
        "单位",
        "单方",
        "车辆",
        "路径",
        "程序",
        "管理",
        "管辖",
        "代表",
        "包括",
        "申请",
        "提出",
        "委托",
        "负责",
        "经办",
        "江苏",
        "江西",
        "湖南",
        "湖北",
        "宁夏",
        "广东",
        "广西",
        "山东",
        "山西",
        "云南",
        "贵州",
        "四川",
        "福建",
        "浙江",
        "安徽",
        "河南",
        "河北",
        "吉林",
        "黑龙",
        "辽宁",
        "甘肃",
        "青海",
        "海南",
        "陕西",
        "新疆",
        "西藏",
        "北京",
        "天津",
        "上海",
        "重庆",
        "香港",
        "澳门",
        "台湾",
        "内蒙",
        "华为",
        "明显",
        "邢台",
        "雷同",
        "曾经",
        "白天",
        "万元",
        "于是",
        "和解",
        "余额",
        "任何",
        "任务",
        "任职",
        "董事",
        "监事",
        "司法",
        "公司",
        "公安",
        "公证",
        "公告",
        "公开",
        "公民",
        "商业",
        "商品",
        "古代",
        "左右",
        "上述",
        "上诉",
        "东方",
        "吴某",
        "连续",
        "连带",
        "毕业",
        "应诉",
        "孔子",
        "庄园",
        "施工",
        "施行",
        "章程",
        "沙漠",
        "柴油",
        "房屋",
        "房产",
        "路段",
        "简易",
        "车间",
        "项下",
        "苗木",
        "景区",
        "宫殿",
        "邮政",
        "费用",
        "卫生",
        "米面",
        "柏油",
        "宗教",
        "全国",
        "边境",
        "师范",
        "商务",
        "池塘",
        "查封",
        "查明",
        "麻醉",
        "岳父",
        "钱款",
        "严重",
        "严格",
        "武装",
        "万分",
        "易燃",
        "齐全",
        "乔迁",
        "伍拾",
        "庞大",
        "颜色",
        "倪某",
        "聂某",
        "鲁莽",
        "焦点",
        "俞某",
        "符合",
        "舒适",
        "纪律",
        "梅毒",
        "童年",
        "凌晨",
        "单独",
        "季度",
        "成年",
        "成交",
        "成员",
        "曲线",
        "游戏",
        "管道",
        "解除",
        "解释",
        "时效",
        "司机",
        "卓越",
        "古迹",
        "吉祥",
        "简单",
        "项目部",
        "党委",
        "党员",
        "冷冻",
        "席位",
        "宗旨",
        "应用",
        "仇恨",
        "商标",
        "荣誉",
        "明知",
        "明细",
        "金融",
        "石油",
        "文化",
        "安排",
        "牛奶",
        "高级",
        "高等",
        "高速",
        "田地",
    }
)
_HONORIFIC = r"(?:先生|女士|同志|小姐)"
_TITLE_AFTER = r"(?:先生|女士|同志|小姐|老师|医生|律师|教授|法官|经理|主任)"
_LABELS_ZH = (
    "再审申请人",
    "被申请执行人",
    "申请执行人",
    "被申请人",
    "申请人",
    "被上诉人",
    "上诉人",
    "被申诉人",
    "申诉人",
    "原审原告",
    "原审被告",
    "原告",
    "被告人",
    "被告",
    "第三人",
    "委托诉讼代理人",
    "委托代理人",
    "诉讼代理人",
    "法定代表人",
    "法定代理人",
    "辩护人",
    "负责人",
    "经办人",
    "审判长",
    "审判员",
    "人民陪审员",
    "陪审员",
    "书记员",
    "法官助理",
    "证人",
    "监护人",
    "担保人",
    "保证人",
    "借款人",
    "出借人",
    "贷款人",
    "债务人",
    "债权人",
    "姓名",
    "联系人",
    "收件人",
    "收货人",
    "寄件人",
    "持卡人",
    "开户人",
    "户名",
    "患者",
    "病人",
    "就诊人",
    "主治医师",
    "签名",
    "签字",
    "签收人",
    "尊敬的",
    "亲爱的",
)
_CJK_RUN = r"[\u4e00-\u9fff·]{1,6}"
_LABEL_ZH_RE = re.compile(
    "(?:" + "|".join(sorted(_LABELS_ZH, key=len, reverse=True)) + r")(?:[（(](?:签名|签字|盖章)[)）])?"
    r"[\s:：)）]{0,3}(?P<run>" + _CJK_RUN + ")"
)
_HONORIFIC_RE = re.compile(_HONORIFIC)
_TITLE_RE = re.compile(_TITLE_AFTER)
# Labels that head a form field: what follows is a name even in running text. The other labels are legal
# and medical roles that are also ordinary words in statutes (``审判长许可``, ``患者康复``): without a colon
# they count only at a clause start and before a clause end, with given-name characters of ``NAME_CHARS``.
_FIELD_LABELS = frozenset(
    {
        "姓名",
        "联系人",
        "收件人",
        "收货人",
        "寄件人",
        "持卡人",
        "开户人",
        "户名",
        "签名",
        "签字",
        "签收人",
        "尊敬的",
        "亲爱的",
    }
)
_CLAUSE_START = frozenset("，,。；;：:、（(）)\n\r\t 　与和及")
_CLAUSE_END = frozenset("，,。；;：:、（(）)\n\r\t 　诉述辩与和及等男女于因向称系的在为是对将被已")
# Single surnames that are also everyday function words or verb starts (和正在, 许可, 向法庭, 时报告 …):
# accepted only after a colon.
_WEAK_SURNAMES = frozenset("和于向时应任全查许解付康申及以从关常")
# Characters common in given names (frequency lists of given names); a role label without a colon needs
# the given name built from these.
NAME_CHARS = frozenset(
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰飞鹏辉晨欣宇轩浩然子涵梓琳思雨博文一诺佳怡建国红梅海波"
    "林燕萍宁凯峰斌俊健辰志新亮兵成勤云龙东鑫琴倩颖婷雪慧莉丹丽萍晶宏伦彬莹瑶璐婧琪晓薇蕾婕芸蓉凤珍贞月莲素"
    "春秋冬夏阳光荣庆德福寿喜安康乐嘉怡悦欣馨蕊萱妍妮娅婉娴雯霏菲芬芝芸茜茹荷莎萌蓓蕙"
    "家豪昊天翔宇泽睿哲瀚航旭彤铭煜鹏飞磊鸿锋毅斌坤凯恒晖瑞祥麟骏腾逸远帆宸奕皓晟楠森柏松杉"
    "淑惠贤慧娇婉媛婵娥秀巧美珠翠琼瑾瑜璇璟琰瑛瑶玲珊珂琦琳琬卿清澜澄洁滢潇湘漪沁泓洪涛波浪"
    "永长正振兴国民华中立延廷彦义仁礼智信忠孝勇毅诚实守仲伯叔季元亨利贞福禄寿喜财金银"
    "小大晓少思梦若如紫雅诗书画琴棋心怡静宁和顺"
)
# Characters that end a verb or preposition right before a name (感谢, 向, 对, 给 …) and are surnames too.
_VERB_BEFORE_NAME = frozenset("谢向对给与和及请让叫找问见是由被把将跟同陪派约访拜称为于经接告送")
_EN_LABEL_RE = re.compile(
    r"(?:\b(?:Patient(?: name)?|Full name|[Nn]ame|Contact|Signed|Signature|Recipient|Plaintiff|Defendant|Applicant|Claimant)"  # noqa: E501
    r"\s*:\s*|\b(?:Dear|Sincerely|Regards|Yours truly|Best regards),?\s+|\b(?:Mr|Mrs|Ms|Miss|Dr|Prof)\.?\s)"
    r"(?P<name>[A-Z][a-z]+(?:[ \-'][A-Z][a-z]+){0,2})\b"
)
_EN_NOT_NAMES = frozenset(
    {
        "Sir",
        "Madam",
        "Customer",
        "Patient",
        "Doctor",
        "Team",
        "Member",
        "Friend",
        "Colleague",
        "All",
        "Parent",
        "Parents",
        "Reader",
        "Editor",
        "The",
        "This",
        "Thank",
        "Thanks",
        "Yes",
        "No",
        "None",
        "Unknown",
        "Other",
        "Names",
        "Not",
        "Your",
        "Our",
        "In",
        "On",
        "At",
    }
)


def _surname_len(s: str) -> int:
    """Length of the surname ``s`` starts with (2 for compound, 1 for single), 0 for none."""
    if s[:2] in COMPOUND_SURNAMES:
        return 2
    return 1 if s[:1] in SINGLE_SURNAMES else 0


def _name_at(run: str) -> int:
    """Length of the name at the start of ``run`` (surname + 1–2 given characters, up to a stop character
    or an honorific), 0 when ``run`` does not start with a plausible name."""
    sl = _surname_len(run)
    if not sl:
        return 0
    n = sl
    while n < len(run) and n < sl + 2 and run[n] not in _STOP:
        if _TITLE_RE.match(run, n):
            break
        n += 1
    rest = run[n:]
    if n == sl or "某" in run[:n] or run[:n] in _NOT_NAMES or run[:2] in _NOT_NAMES:
        return 0
    # A longer unbroken run is an organisation or a phrase (``王府井百货有限公司``), not a name.
    if rest and rest[0] not in _STOP and not _TITLE_RE.match(rest):
        return 0
    return n


def detect_name(work: str) -> Iterator[Hit]:
    """Person names after labels, before honorifics and in English forms (see the module docstring)."""
    for m in _LABEL_ZH_RE.finditer(work):
        start = m.start("run")
        n = _name_at(work[start : start + 8])
        if not n:
            continue
        label = work[m.start() : start].rstrip(" \t:：)）")
        colon = any(c in ":：" for c in work[m.start() : start])
        if not colon and label not in ("尊敬的", "亲爱的"):
            sl = _surname_len(work[start:])
            before_ok = m.start() == 0 or work[m.start() - 1] in _CLAUSE_START
            after_ok = start + n == len(work) or work[start + n] in _CLAUSE_END or _TITLE_RE.match(work, start + n)
            if (
                not before_ok
                or not after_ok
                or (work[start] in _WEAK_SURNAMES and sl == 1)
                or any(c not in NAME_CHARS for c in work[start + sl : start + n])
            ):
                continue
        yield Hit("NAME", start, start + n, "name:label", 0.9 if colon else 0.8)
    for m in _HONORIFIC_RE.finditer(work):
        end = m.start()
        for n in (4, 3, 2):  # longest plausible name directly before the honorific
            s = end - n
            if s < 0:
                continue
            cand = work[s:end]
            if any(c in _STOP or not "\u4e00" <= c <= "\u9fff" for c in cand):
                continue
            if n >= 3 and cand[0] in _VERB_BEFORE_NAME and s > 0 and "\u4e00" <= work[s - 1] <= "\u9fff":
                continue  # 感谢杨思同志: 谢 ends 感谢 here, the name is 杨思
            if (
                _surname_len(cand)
                and _name_at(cand + m.group()) == n
                and (
                    s == 0 or not _surname_len(work[s - 1]) or work[s - 1] in _VERB_BEFORE_NAME or work[s - 1] in _STOP
                )
            ):
                yield Hit("NAME", s, end, "name:honorific", 0.85)
                break
    if ":" in work or "." in work or "Dear" in work or "," in work:
        for m in _EN_LABEL_RE.finditer(work):
            name = m.group("name")
            if name.split()[0] in _EN_NOT_NAMES:
                continue
            yield Hit("NAME", m.start("name"), m.end("name"), "name:en-label", 0.85)


# --- postal addresses -------------------------------------------------------------------------------------
_PROVINCES = (
    "北京",
    "天津",
    "上海",
    "重庆",
    "河北",
    "山西",
    "辽宁",
    "吉林",
    "黑龙江",
    "江苏",
    "浙江",
    "安徽",
    "福建",
    "江西",
    "山东",
    "河南",
    "湖北",
    "湖南",
    "广东",
    "海南",
    "四川",
    "贵州",
    "云南",
    "陕西",
    "甘肃",
    "青海",
    "台湾",
    "内蒙古",
    "广西",
    "西藏",
    "宁夏",
    "新疆",
    "香港",
    "澳门",
)
_ADDR_LABEL = r"(?:住址|住所地|住所|地址|现住|住|户籍地|居住地|居住于|寄往|送达地址|家住|通讯地址|联系地址)[\s:：]{0,2}"
_CN = r"[\u4e00-\u9fff]"
_ADDR_LABELS = (
    "住所地",
    "住址",
    "住所",
    "地址",
    "现住",
    "户籍地",
    "居住地",
    "居住于",
    "寄往",
    "送达地址",
    "家住",
    "通讯地址",
    "联系地址",
)
_ADDR_RE = re.compile(
    r"(?:(?:" + "|".join(sorted(_ADDR_LABELS, key=len, reverse=True)) + r"|(?<=[，,。；;\s])住)[\s:：]{0,2}"
    r"|(?=" + "|".join(_PROVINCES) + "))"
    r"(?P<addr>(?:" + _CN + r"{2,4}?(?:省|自治区|特别行政区))?"
    r"(?:" + _CN + r"{2,5}?(?:市|自治州|地区|盟))?"
    r"(?:" + _CN + r"{1,6}?(?:区|县|旗|市))?"
    r"(?:" + _CN + r"{1,6}?(?:镇|乡|街道))?"
    r"(?:" + _CN + r"{1,8}?(?:村|社区|小区|开发区|园区))?"
    r"[\u4e00-\u9fff0-9]{1,10}?(?:路|街|大道|道|巷|胡同|弄|里|村)[0-9]{1,5}(?:-[0-9]{1,5})?号"
    r"(?:院|大院)?(?:[0-9A-Z]{1,4}(?:栋|幢|座|号楼|楼))?(?:[0-9]{1,3}单元)?(?:[0-9]{1,5}(?:室|房|号))?)"
)
_EN_ADDR_RE = re.compile(
    r"\b\d{1,5} (?:[A-Z][a-z]+ ){1,3}(?:Street|Avenue|Road|Boulevard|Lane|Drive|Court|Way|Place|Terrace|Close|"
    r"(?:St|Ave|Rd|Blvd|Ln|Dr|Ct|Pl)\.?)(?![A-Za-z])(?:,? (?:Apt|Suite|Unit|Flat)\.? ?[0-9A-Z]{1,5})?"
    r"(?:, [A-Z][a-z]+(?: [A-Z][a-z]+)?)?(?:, [A-Z]{2} \d{5}(?:-\d{4})?)?"
)


def detect_address(work: str) -> Iterator[Hit]:
    """Postal addresses down to a house number: a Chinese address starts at a province name or right after
    an address label (``住址``, ``住所地``, ``现住`` …) and runs through optional province / city / district /
    town / village levels to a road (路, 街, 大道, 巷, 胡同, 弄 …) with a number and ``号``, then optional
    building, unit and room; region names alone (``北京市海淀区``) and document numbers stay. An English
    address is a house number, one to three capitalised words and a street type, optional unit, city and
    ``ST 12345`` state + ZIP."""
    if "号" in work:
        for m in _ADDR_RE.finditer(work):
            yield Hit("ADDRESS", m.start("addr"), m.end("addr"), "address:cn-pattern", 0.9)
    if _DIGIT.search(work) is not None:
        for m in _EN_ADDR_RE.finditer(work):
            yield Hit("ADDRESS", m.start(), m.end(), "address:en-pattern", 0.85)


# --- dates of birth ------------------------------------------------------------------------------------------
_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DATE = (
    r"(?:(?:19|20)\d{2}年\d{1,2}月(?:\d{1,2}日)?|(?:19|20)\d{2}[-/.]\d{1,2}[-/.]\d{1,2}"
    r"|\d{1,2}/\d{1,2}/(?:19|20)\d{2}|" + _MONTHS + r" \d{1,2}, (?:19|20)\d{2}|\d{1,2} " + _MONTHS + r" (?:19|20)\d{2})"
)
_DOB_BEFORE_RE = re.compile(
    r"(?:出生日期|出生年月日?|生日|出生于|生于|出生时间|DOB|D\.O\.B\.?|[Dd]ate of [Bb]irth|[Bb]irth ?[Dd]ate|[Bb]orn(?: on)?)"  # noqa: E501
    r"\s*[:：]?\s*(?P<date>" + _DATE + ")"
)
_DOB_AFTER_RE = re.compile(r"(?P<date>" + _DATE + r")\s*(?:出生|生人|生)(?![产效活存命])")


def detect_birth_date(work: str) -> Iterator[Hit]:
    """Dates of birth, only with context: after ``出生日期``/``生日``/``出生于``/``DOB``/``Date of birth``/
    ``born on`` …, or before ``出生`` / ``生`` (``1985年6月12日出生``, as judgments write it). Any other date
    stays. Formats: ``1990年3月7日`` (day optional), ``1990-03-07`` / ``/`` / ``.``, ``07/03/1990``,
    ``March 7, 1990``, ``7 March 1990``."""
    if not _DIGIT.search(work) is not None:
        return
    for m in _DOB_BEFORE_RE.finditer(work):
        yield Hit("BIRTH_DATE", m.start("date"), m.end("date"), "dob:label", 0.95)
    if "生" in work:
        for m in _DOB_AFTER_RE.finditer(work):
            yield Hit("BIRTH_DATE", m.start("date"), m.end("date"), "dob:born", 0.9)
