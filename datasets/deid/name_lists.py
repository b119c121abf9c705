"""The word lists of the name detector (``names.py``, ``names_en.py``): surnames, given-name characters,
words that only look like names, public figures, titles, labels and role words. Sources: the 2020 census
lists of surnames, frequency lists of given names, jieba's own dictionary entries tagged ``nr`` that are
everyday words, and the legal-document and record vocabulary of the labels."""

from __future__ import annotations


def words(text: str) -> frozenset[str]:
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
COMPOUND_SURNAMES = words(
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
NOT_NAMES = words(
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
PUBLIC_FIGURES = words(
    """
    毛泽东 邓小平 江泽民 胡锦涛 习近平 孙中山 周恩来 刘少奇 朱德 马克思 恩格斯 列宁 斯大林 孔子 孟子 老子 庄子
    """
)
# The Chinese "John Doe"s of examples and forms: nobody's name.
PLACEHOLDER_NAMES = words("张三 李四 王五 赵六 钱七 孙八 张三丰")
WEAK_SURNAMES = frozenset(
    "和于向时应任全查许解付康申及以从关常元党位来木花计乐封原官衣楚台僧银扬伏习保强井练敬母乌诸薄"
)
TITLES = words(
    """
    先生 女士 同志 小姐 老师 医生 大夫 律师 教授 法官 检察官 警官 经理 主任 主任医师 副主任医师 医师 护士 护士长
    师傅 同学 阿姨 叔叔 总监 主管 工程师 书记 院长 校长 科长 处长 局长 部长 董事长 店长 老板 博士
    """
)
# Labels and roles after which a name follows. Field labels count anywhere; role words without a colon
# count at a clause start and need the tagger's ``nr`` or given-name characters (``审判长许可`` stays).
FIELD_LABELS = words(
    """
    姓名 联系人 紧急联系人 收件人 收货人 寄件人 持卡人 开户人 户名 签名 签字 签收人 尊敬的 亲爱的 就诊人 受检人
    申请人 被申请人 投诉人 报案人 报销人 审批人 委托人 受送达人 被执行人 申请执行人 甲方 乙方 客户 户主
    """
)
ROLE_WORDS = words(
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
LIGHT_ROLES = words("联系 致电 感谢 通知 转给 找 约了")  # need the tagger's nr or a clause end as well
