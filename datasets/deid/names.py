"""Person names in Chinese, English and German text: a statistical tagger's candidates weighed with the
evidence of labels, roles, titles, speakers and neighbouring identifiers.

**The tagger.** ``rjieba`` (PyPI; the Python binding of ``jieba-rs``, jieba's Rust port, MIT): its
part-of-speech tagger marks person names ``nr`` / ``nrfg``, from jieba's dictionary (built into the wheel)
and, for words not in it, from jieba's HMM; nothing is downloaded, ever. Loaded once per process on first
use (~0.3 s; the dictionary is compiled into the extension). Measured on this project's corpora (2 shared
cores): tagging runs at ~4 MB/s of Chinese text, the whole de-identifier went from ~2.5 to ~1.7 MB/s (see
``benchmarks/deid_bench.py``; the upload pipeline's throughput in ``benchmarks/dataset_pipeline.py``).
Rejected: jieba's own ``posseg`` (pure Python, 0.13 MB/s); ``pkuseg``/``spacy-pkuseg`` (their tagging
models download at first use); ``names-dataset`` (gigabytes of memory for its tables); Faker's name tables
(they generate the held-out evaluation set, ``tests/datasets/deid_heldout``: a detector built on them would
be scored on its own list); ``nameparser`` (splits a name already found, finds none).

**What the tag is worth.** jieba's dictionary tags tens of thousands of entries ``nr``, among them everyday
words (``许可``, ``陈述``, ``文明``, ``高峰``, ``申请人``) and public figures (``毛泽东``, ``邓小平``). So a candidate
(a surname of ``SURNAMES`` and one or two given-name characters; compound surnames too) is taken:

- with **evidence** of a person: after a label or role word (``姓名：``, ``原告``, ``车主``, ``注册人``,
  ``老师``, ``旅客`` …), before a title (``医生``, ``老师``, ``先生``, ``主任`` …), as the speaker of a chat
  line (``2024-03-15 14:02 陈静：…``), next to an identifier already found (``秦勇18620334471``), at the head of
  a record (``龙阳，工号…``, ``高远，男，``), before a verb of speech or record (``说``, ``反馈``, ``出庭`` …) or
  in a list with a name found so (``姚文、陈雷``) — when the tagger tags it a name or its given name is made
  of given-name characters (``NAME_CHARS``);
- **without** evidence only when the tagger found it by its HMM (not a dictionary word), its given name
  is made of given-name characters and no organisation or place word follows (``…市``, ``…公司``).

Precision guards: words that start with a surname character and are not names (``_NOT_NAMES``); surnames
that are also function words (``_WEAK_SURNAMES``: ``许可``, ``和解``) need a colon label or a speaker line;
pseudonyms (``张某``) stay; public figures named in citations of law (``PUBLIC_FIGURES``: ``毛泽东思想``,
``邓小平理论``) are never replaced — an organisation's own allow-list (``DeidOptions.allow``) keeps others.

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

from .numbers import Hit
from .times import datetime_spans


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (the word lists below are kept as prose)."""
    return frozenset(text.split())


# The common single surnames (about 95 % of the population by the 2020 census lists) and the compound ones.
SINGLE_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
    "姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温康施"
    "文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷"
    "盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷"
    "晏席卫米柏宗瞿桂全佟应臧闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
    "萧廉祖房郎谈傅赖阎胥储闻逄綦訾郜扈宦冀郏浦晁阚鞠蒯竺逯桓揭宿荀邸邴於臧嵇濮隗钮蔺昝贲帅廉蔚佟元"
    "洪辜丘晋畅奚屠郁糜鄢稽冼栗谌植燕匡"
    "位来木花计乐封原官衣楚台僧银扬伏习保强井练敬母乌诸薄"
)
COMPOUND_SURNAMES = _words(
    """
    欧阳 司马 诸葛 上官 东方 皇甫 尉迟 公孙 慕容 令狐 司徒 夏侯 长孙 宇文 端木 独孤 南宫 西门 呼延 轩辕 澹台 百里
    钟离 万俟 闻人
    """
)
SURNAMES = SINGLE_SURNAMES | frozenset(COMPOUND_SURNAMES)

# Characters common in given names (frequency lists of given names).
NAME_CHARS = frozenset(
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰飞鹏辉晨欣宇轩浩然子涵梓琳思雨博文一诺佳怡建国红梅海波"
    "林燕萍宁凯峰斌俊健辰志新亮兵成勤云龙东鑫琴倩颖婷雪慧莉丹丽萍晶宏伦彬莹瑶璐婧琪晓薇蕾婕芸蓉凤珍贞月莲素"
    "春秋冬夏阳光荣庆德福寿喜安康乐嘉怡悦欣馨蕊萱妍妮娅婉娴雯霏菲芬芝芸茜茹荷莎萌蓓蕙"
    "家豪昊天翔宇泽睿哲瀚航旭彤铭煜鹏飞磊鸿锋毅斌坤凯恒晖瑞祥麟骏腾逸远帆宸奕皓晟楠森柏松杉"
    "淑惠贤慧娇婉媛婵娥秀巧美珠翠琼瑾瑜璇璟琰瑛瑶玲珊珂琦琳琬卿清澜澄洁滢潇湘漪沁泓洪涛波浪"
    "永长正振兴国民华中立延廷彦义仁礼智信忠孝勇毅诚实守仲伯叔季元亨利贞福禄寿喜财金银"
    "小大晓少思梦若如紫雅诗书画琴棋心怡静宁和顺"
    "雷鹰鹤虎彪豹熊鹏燕莺鸣岚岩峻崇嵩川江溪涌浩淼源润泉汉洲渊沛霖露霜霞虹彩蓝青碧翠红丹朱紫"
    "俭勋杭桐楷榕槐樟梧棠桦柳杨桃李杏梨芹芷苇荣蔚蓬萱蕾艾茵苗莺婧娟嫣婕婉媚婷娅娜姗妤姝娴霓晴晶昭晨曦映"
    "舒畅达通顺利胜强刚毅威武雄豪杰俊英贤良才艺术学敬钦宗耀光辉煌亮鑫铭钧锐钰铎锦镇磊"
    "冰凝菁蓓莹萌萍茂芸菊蓉荔莉蒙欢想帅群超越迪卫东宝珍荣华富贵"
    "花香枝娣妹凤菊秀贝鹃昕晗玥淇炜烨珏琛瑄舟骁珺钊沫"
)
# Words that start with a surname character and follow a role word in ordinary prose; the dictionary's
# own everyday words tagged ``nr``.
_NOT_NAMES = _words(
    """
    方面 方式 方法 高度 周年 王国 黄金 金额 林业 安全 向上 常委 文件 明确 成立 成本 时间 时候 全部 全体 关于 关系
    应当 项目 单位 单方 车辆 路径 程序 管理 管辖 代表 包括 申请 提出 委托 负责 经办 江苏 江西 湖南 湖北 宁夏 广东
    广西 山东 山西 云南 贵州 四川 福建 浙江 安徽 河南 河北 吉林 黑龙 辽宁 甘肃 青海 海南 陕西 新疆 西藏 北京 天津
    上海 重庆 香港 澳门 台湾 内蒙 华为 明显 邢台 雷同 曾经 白天 万元 于是 和解 余额 任何 任务 任职 董事 监事 司法
    公司 公安 公证 公告 公开 公民 商业 商品 古代 左右 上述 上诉 东方 吴某 连续 连带 毕业 应诉 孔子 庄园 施工 施行
    章程 沙漠 柴油 房屋 房产 路段 简易 车间 项下 苗木 景区 宫殿 邮政 费用 卫生 米面 柏油 宗教 全国 边境 师范 商务
    池塘 查封 查明 麻醉 岳父 钱款 严重 严格 武装 万分 易燃 齐全 乔迁 伍拾 庞大 颜色 倪某 聂某 鲁莽 焦点 俞某 符合
    舒适 纪律 梅毒 童年 凌晨 单独 季度 成年 成交 成员 曲线 游戏 管道 解除 解释 时效 司机 卓越 古迹 吉祥 简单
    项目部 党委 党员 冷冻 席位 宗旨 应用 仇恨 商标 荣誉 明知 明细 金融 石油 文化 安排 牛奶 高级 高等 高速 田地
    文明 阳光 陆军 武林 白雪 高峰 石英 辛勤 胡子 桂林 柏林 叶子 安静 向东 安娜 孙子 高明 丛林 明珠 王子 林立 向阳
    黎明 常德 宁静 蓝天 金刚 朱红 白莲 苏军 童子 史诗 金平 宁远 黄龙 华丽 石林 林子 梅子 白云 梅林 史实 古文 钱财
    金莲 温馨 白银 殷勤 明智 祝福 严正 金光 高超 高雅 金额 文明办 荣军 华夏 中华 明天 明年 明日 程度 高中 高考
    高温 高原 高楼 高山 高新 高校 高层 金属 金色 金牌 石头 石化 石家 江山 江南 江北 江湖 海关 海洋 林场 林区 宁波
    常州 温州 苏州 杭州 广州 万家 毛泽 邓小 周末 周边 周期 周围 于此 于今 汪洋 梁山 黄河 长江 龙头 龙门 华东 华南
    华北 华中 华西 马路 马上 马克 马来 万一 万达 万科 冯氏 卢湾 罗湖 罗马 傅里 潘家 盛世 谢谢 和平 和谐 安心 安好
    明白 明星 高兴 文字 文章 金山 成都 成功 成绩 江门 宁德 吉安 常熟 连云 丁香 丁丁
    """
)
# Public figures named in citations of law and of the state's guiding ideas; never replaced as names.
PUBLIC_FIGURES = _words(
    """
    毛泽东 邓小平 江泽民 胡锦涛 习近平 孙中山 周恩来 刘少奇 朱德 马克思 恩格斯 列宁 斯大林 孔子 孟子 老子 庄子
    """
)
# The Chinese "John Doe"s of examples and forms: nobody's name.
_PLACEHOLDER_NAMES = _words("张三 李四 王五 赵六 钱七 孙八 张三丰")
_STOP = frozenset(
    "诉述辩与和及等的于因向称系是为在将对被已应均并以由从自男女性年岁住现身电手号籍族出同生，。、；：:;,.!?！？（）()"
    "「」『』“”\"'《》<>[]【】 \t\r\n/\\|-—·…之其该此某\ue000"
)
# Single surnames that are also everyday function words or verb starts (和正在, 许可, 向法庭, 时报告 …).
_WEAK_SURNAMES = frozenset(
    "和于向时应任全查许解付康申及以从关常元党位来木花计乐封原官衣楚台僧银扬伏习保强井练敬母乌诸薄"
)
_HONORIFIC = r"(?:先生|女士|同志|小姐)"
_TITLES = _words(
    """
    先生 女士 同志 小姐 老师 医生 大夫 律师 教授 法官 检察官 警官 经理 主任 主任医师 副主任医师 医师 护士 护士长
    师傅 同学 阿姨 叔叔 总监 主管 工程师 书记 院长 校长 科长 处长 局长 部长 董事长 店长 老板 博士
    """
)
_TITLE_RE = re.compile("|".join(sorted(_TITLES, key=len, reverse=True)))
_HONORIFIC_RE = re.compile(_HONORIFIC)
# Labels and roles after which a name follows. Field labels count anywhere; role words without a colon
# count at a clause start and need the tagger's ``nr`` or given-name characters (``审判长许可`` stays).
_FIELD_LABELS = _words(
    """
    姓名 联系人 紧急联系人 收件人 收货人 寄件人 持卡人 开户人 户名 签名 签字 签收人 尊敬的 亲爱的 就诊人 受检人
    申请人 被申请人 投诉人 报案人 报销人 审批人 委托人 受送达人 被执行人 申请执行人 甲方 乙方 客户 户主
    """
)
_ROLE_WORDS = _words(
    """
    再审申请人 申请执行人 被申请人 被上诉人 上诉人 被申诉人 申诉人 原审原告 原审被告 原告 被告人 被告 第三人
    委托诉讼代理人 委托代理人 诉讼代理人 法定代表人 法定代理人 附带民事诉讼原告人 辩护人 负责人 经办人 审判长
    审判员 人民陪审员 陪审员 书记员 法官助理 证人 监护人 担保人 保证人 借款人 出借人 贷款人 债务人 债权人 患者
    病人 主治医师 主治医生 值班医生 转诊医生 主任医师 医师 药师 护士 家属 车主 业主 房东 租客 注册人 用户 旅客
    乘客 顾客 会员 员工 离职员工 同事 快递员 司机 店长 群主 买家 卖家 经理 主任 上级 直属上级 下属 主管 部门主管
    候选人 面试官 被面谈人 面谈人 学生 家长 儿子 女儿 丈夫 妻子 老公 老婆 父亲 母亲 律师 维修师傅 师傅 客服 柜员
    审核 审核人 销售部 技术部 财务部 人事部 行政部 市场部 研发部 销售 工程师 老师 医生 教授 法官 同学 朋友 联系
    致电 感谢 通知 转给 找 约了
    """
)
_ROLES_RE = re.compile(
    "(?:" + "|".join(sorted(_FIELD_LABELS | _ROLE_WORDS, key=len, reverse=True)) + r")(?:[（(](?:签名|签字|盖章)[)）])?"
)
_LIGHT_ROLES = _words("联系 致电 感谢 通知 转给 找 约了")  # need the tagger's nr or a clause end as well
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
        self.bounds: set[int] = {0, len(text)}
        self.nr: dict[int, int] = {}
        self.nr_oov: set[int] = set()
        self.tag_at: dict[int, str] = {}  # the tag of the token starting at an offset
        self.tag_before: dict[int, str] = {}  # ... and of the one ending there
        self._ends: list[int] | None = None  # sorted bounds, made on first use
        pos = 0
        has_word = _in_dictionary()
        for word, tag in _tagger()(text):
            end = pos + len(word)
            self.bounds.add(end)
            self.tag_at[pos] = tag
            self.tag_before[end] = tag
            if tag in ("nr", "nrfg") and _shape_ok(word):
                # A dictionary word tagged nr counts only with a given name of given-name characters: the
                # dictionary tags everyday words nr (许可, 牟利, 陈述).
                oov = not has_word(word)
                if oov or _given_ok(word):
                    self.nr[pos] = end
                if oov:
                    self.nr_oov.add(pos)
            pos = end

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


# --- English and German ------------------------------------------------------------------------------------
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
_EN_NOT_NAMES = _words(
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
_EN_TAIL_NOT = _words(
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
_EN_KEYWORDS = _words(
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


def _english_names(work: str) -> Iterator[Hit]:
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


def detect_name(work: str) -> Iterator[Hit]:
    """Person names (see the module docstring): Chinese by the tagger and evidence, English and German
    by context."""
    if _CJK_CHAR.search(work) is not None:
        yield from _chinese_names(work)
    if any(c.isupper() for c in work[:1]) or re.search(r"[A-Z]", work) is not None:
        yield from _english_names(work)
