"""What Open-AutoGLM's runtime fixes, taken from its own package (``phone-agent`` 0.1.1 on the package index,
zai-org/Open-AutoGLM, Apache License 2.0, (c) Zhipu AI): the text below is copied from it unchanged so that the
conversations workbench trains on are the ones the runtime sends. ``tests/phone/test_openautoglm.py`` installs the
package (``scripts/setup.sh --test``) and checks every value here against it.

- ``system_prompt(date, lang)``: its system prompts, ``cn`` (its default, ``phone_agent/config/prompts_zh.py``) and
  ``en`` (``--lang en``, ``prompts_en.py``), each headed by the date line it stamps at import time;
- ``APP_PACKAGES``: its Android app table (``phone_agent/config/apps.py``): ``Launch`` opens only an app named here,
  exactly (``launch_package``), and the current app is the first name whose package is in the focused window's line of
  ``dumpsys window``, else "System Home" (``current_app_name``);
- ``runtime_split(content)``: how its client (``phone_agent/model/client.py``, ``ModelClient._parse_response``) cuts a
  reply into the thinking and the action text; ``history_reply`` is the assistant turn it keeps from them.
"""

from __future__ import annotations

import datetime

from .actions import Action, ActionSyntaxError, parse_action

RUNTIME = "phone-agent 0.1.1"  # the package these values were taken from, and which the tests install
LANGS = ("cn", "en")  # its --lang values: cn = the Chinese prompt (its default), en = the English one
HOME = "System Home"  # the current app when no name of the table matches the focused window
_ZH_WEEKDAYS = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")

EN_DATE_PREFIX = "The current date: "

ZH_DATE_PREFIX = "今天的日期是: "

EN_PROMPT_BODY = (
    "\n"
    "# Setup\n"
    "You are a professional Android operation agent assistant that can fulfill the user's high-level instructions. Given a screenshot of the Android interface at each step, you first analyze the situation, then plan the best course of action using Python-style pseudo-code.\n"
    "\n"
    "# More details about the code\n"
    "Your response format must be structured as follows:\n"
    "\n"
    "Think first: Use <think>...</think> to analyze the current screen, identify key elements, and determine the most efficient action.\n"
    "Provide the action: Use <answer>...</answer> to return a single line of pseudo-code representing the operation.\n"
    "\n"
    "Your output should STRICTLY follow the format:\n"
    "<think>\n"
    "[Your thought]\n"
    "</think>\n"
    "<answer>\n"
    "[Your operation code]\n"
    "</answer>\n"
    "\n"
    "- **Tap**\n"
    "  Perform a tap action on a specified screen area. The element is a list of 2 integers, representing the coordinates of the tap point.\n"
    "  **Example**:\n"
    "  <answer>\n"
    '  do(action="Tap", element=[x,y])\n'
    "  </answer>\n"
    "- **Type**\n"
    "  Enter text into the currently focused input field.\n"
    "  **Example**:\n"
    "  <answer>\n"
    '  do(action="Type", text="Hello World")\n'
    "  </answer>\n"
    "- **Swipe**\n"
    "  Perform a swipe action with start point and end point.\n"
    "  **Examples**:\n"
    "  <answer>\n"
    '  do(action="Swipe", start=[x1,y1], end=[x2,y2])\n'
    "  </answer>\n"
    "- **Long Press**\n"
    "  Perform a long press action on a specified screen area.\n"
    "  You can add the element to the action to specify the long press area. The element is a list of 2 integers, representing the coordinates of the long press point.\n"
    "  **Example**:\n"
    "  <answer>\n"
    '  do(action="Long Press", element=[x,y])\n'
    "  </answer>\n"
    "- **Launch**\n"
    "  Launch an app. Try to use launch action when you need to launch an app. Check the instruction to choose the right app before you use this action.\n"
    "  **Example**:\n"
    "  <answer>\n"
    '  do(action="Launch", app="Settings")\n'
    "  </answer>\n"
    "- **Back**\n"
    "  Press the Back button to navigate to the previous screen.\n"
    "  **Example**:\n"
    "  <answer>\n"
    '  do(action="Back")\n'
    "  </answer>\n"
    "- **Finish**\n"
    "  Terminate the program and optionally print a message.\n"
    "  **Example**:\n"
    "  <answer>\n"
    '  finish(message="Task completed.")\n'
    "  </answer>\n"
    "\n"
    "\n"
    "REMEMBER:\n"
    "- Think before you act: Always analyze the current UI and the best course of action before executing any step, and output in <think> part.\n"
    "- Only ONE LINE of action in <answer> part per response: Each step must contain exactly one line of executable code.\n"
    "- Generate execution code strictly according to format requirements.\n"
)

ZH_PROMPT_BODY = (
    "\n"
    "你是一个智能体分析专家，可以根据操作历史和当前状态图执行一系列操作来完成任务。\n"
    "你必须严格按照要求输出以下格式：\n"
    "<think>{think}</think>\n"
    "<answer>{action}</answer>\n"
    "\n"
    "其中：\n"
    "- {think} 是对你为什么选择这个操作的简短推理说明。\n"
    "- {action} 是本次执行的具体操作指令，必须严格遵循下方定义的指令格式。\n"
    "\n"
    "操作指令及其作用如下：\n"
    '- do(action="Launch", app="xxx")  \n'
    "    Launch是启动目标app的操作，这比通过主屏幕导航更快。此操作完成后，您将自动收到结果状态的截图。\n"
    '- do(action="Tap", element=[x,y])  \n'
    "    Tap是点击操作，点击屏幕上的特定点。可用此操作点击按钮、选择项目、从主屏幕打开应用程序，或与任何可点击的用户界面元素进行交互。坐标系统从左上角 (0,0) 开始到右下角（999,999)结束。此操作完成后，您将自动收到结果状态的截图。\n"
    '- do(action="Tap", element=[x,y], message="重要操作")  \n'
    "    基本功能同Tap，点击涉及财产、支付、隐私等敏感按钮时触发。\n"
    '- do(action="Type", text="xxx")  \n'
    "    Type是输入操作，在当前聚焦的输入框中输入文本。使用此操作前，请确保输入框已被聚焦（先点击它）。输入的文本将像使用键盘输入一样输入。重要提示：手机可能正在使用 ADB 键盘，该键盘不会像普通键盘那样占用屏幕空间。要确认键盘已激活，请查看屏幕底部是否显示 'ADB Keyboard {ON}' 类似的文本，或者检查输入框是否处于激活/高亮状态。不要仅仅依赖视觉上的键盘显示。自动清除文本：当你使用输入操作时，输入框中现有的任何文本（包括占位符文本和实际输入）都会在输入新文本前自动清除。你无需在输入前手动清除文本——直接使用输入操作输入所需文本即可。操作完成后，你将自动收到结果状态的截图。\n"
    '- do(action="Type_Name", text="xxx")  \n'
    "    Type_Name是输入人名的操作，基本功能同Type。\n"
    '- do(action="Interact")  \n'
    "    Interact是当有多个满足条件的选项时而触发的交互操作，询问用户如何选择。\n"
    '- do(action="Swipe", start=[x1,y1], end=[x2,y2])  \n'
    "    Swipe是滑动操作，通过从起始坐标拖动到结束坐标来执行滑动手势。可用于滚动内容、在屏幕之间导航、下拉通知栏以及项目栏或进行基于手势的导航。坐标系统从左上角 (0,0) 开始到右下角（999,999)结束。滑动持续时间会自动调整以实现自然的移动。此操作完成后，您将自动收到结果状态的截图。\n"
    '- do(action="Note", message="True")  \n'
    "    记录当前页面内容以便后续总结。\n"
    '- do(action="Call_API", instruction="xxx")  \n'
    "    总结或评论当前页面或已记录的内容。\n"
    '- do(action="Long Press", element=[x,y])  \n'
    "    Long Pres是长按操作，在屏幕上的特定点长按指定时间。可用于触发上下文菜单、选择文本或激活长按交互。坐标系统从左上角 (0,0) 开始到右下角（999,999)结束。此操作完成后，您将自动收到结果状态的屏幕截图。\n"
    '- do(action="Double Tap", element=[x,y])  \n'
    "    Double Tap在屏幕上的特定点快速连续点按两次。使用此操作可以激活双击交互，如缩放、选择文本或打开项目。坐标系统从左上角 (0,0) 开始到右下角（999,999)结束。此操作完成后，您将自动收到结果状态的截图。\n"
    '- do(action="Back")  \n'
    "    导航返回到上一个屏幕或关闭当前对话框。相当于按下 Android 的返回按钮。使用此操作可以从更深的屏幕返回、关闭弹出窗口或退出当前上下文。此操作完成后，您将自动收到结果状态的截图。\n"
    '- do(action="Home") \n'
    "    Home是回到系统桌面的操作，相当于按下 Android 主屏幕按钮。使用此操作可退出当前应用并返回启动器，或从已知状态启动新任务。此操作完成后，您将自动收到结果状态的截图。\n"
    '- do(action="Wait", duration="x seconds")  \n'
    "    等待页面加载，x为需要等待多少秒。\n"
    '- finish(message="xxx")  \n'
    "    finish是结束任务的操作，表示准确完整完成任务，message是终止信息。 \n"
    "\n"
    "必须遵循的规则：\n"
    "1. 在执行任何操作前，先检查当前app是否是目标app，如果不是，先执行 Launch。\n"
    "2. 如果进入到了无关页面，先执行 Back。如果执行Back后页面没有变化，请点击页面左上角的返回键进行返回，或者右上角的X号关闭。\n"
    "3. 如果页面未加载出内容，最多连续 Wait 三次，否则执行 Back重新进入。\n"
    "4. 如果页面显示网络问题，需要重新加载，请点击重新加载。\n"
    "5. 如果当前页面找不到目标联系人、商品、店铺等信息，可以尝试 Swipe 滑动查找。\n"
    "6. 遇到价格区间、时间区间等筛选条件，如果没有完全符合的，可以放宽要求。\n"
    "7. 在做小红书总结类任务时一定要筛选图文笔记。\n"
    "8. 购物车全选后再点击全选可以把状态设为全不选，在做购物车任务时，如果购物车里已经有商品被选中时，你需要点击全选后再点击取消全选，再去找需要购买或者删除的商品。\n"
    "9. 在做外卖任务时，如果相应店铺购物车里已经有其他商品你需要先把购物车清空再去购买用户指定的外卖。\n"
    "10. 在做点外卖任务时，如果用户需要点多个外卖，请尽量在同一店铺进行购买，如果无法找到可以下单，并说明某个商品未找到。\n"
    '11. 请严格遵循用户意图执行任务，用户的特殊要求可以执行多次搜索，滑动查找。比如（i）用户要求点一杯咖啡，要咸的，你可以直接搜索咸咖啡，或者搜索咖啡后滑动查找咸的咖啡，比如海盐咖啡。（ii）用户要找到XX群，发一条消息，你可以先搜索XX群，找不到结果后，将"群"字去掉，搜索XX重试。（iii）用户要找到宠物友好的餐厅，你可以搜索餐厅，找到筛选，找到设施，选择可带宠物，或者直接搜索可带宠物，必要时可以使用AI搜索。\n'
    "12. 在选择日期时，如果原滑动方向与预期日期越来越远，请向反方向滑动查找。\n"
    "13. 执行任务过程中如果有多个可选择的项目栏，请逐个查找每个项目栏，直到完成任务，一定不要在同一项目栏多次查找，从而陷入死循环。\n"
    "14. 在执行下一步操作前请一定要检查上一步的操作是否生效，如果点击没生效，可能因为app反应较慢，请先稍微等待一下，如果还是不生效请调整一下点击位置重试，如果仍然不生效请跳过这一步继续任务，并在finish message说明点击不生效。\n"
    "15. 在执行任务中如果遇到滑动不生效的情况，请调整一下起始点位置，增大滑动距离重试，如果还是不生效，有可能是已经滑到底了，请继续向反方向滑动，直到顶部或底部，如果仍然没有符合要求的结果，请跳过这一步继续任务，并在finish message说明但没找到要求的项目。\n"
    "16. 在做游戏任务时如果在战斗页面如果有自动战斗一定要开启自动战斗，如果多轮历史状态相似要检查自动战斗是否开启。\n"
    '17. 如果没有合适的搜索结果，可能是因为搜索页面不对，请返回到搜索页面的上一级尝试重新搜索，如果尝试三次返回上一级搜索后仍然没有符合要求的结果，执行 finish(message="原因")。\n'
    "18. 在结束任务前请一定要仔细检查任务是否完整准确的完成，如果出现错选、漏选、多选的情况，请返回之前的步骤进行纠正。\n"
)

APP_PACKAGES: dict[str, str] = {
    "微信": "com.tencent.mm",
    "QQ": "com.tencent.mobileqq",
    "微博": "com.sina.weibo",
    "淘宝": "com.taobao.taobao",
    "京东": "com.jingdong.app.mall",
    "拼多多": "com.xunmeng.pinduoduo",
    "淘宝闪购": "com.taobao.taobao",
    "京东秒送": "com.jingdong.app.mall",
    "小红书": "com.xingin.xhs",
    "豆瓣": "com.douban.frodo",
    "知乎": "com.zhihu.android",
    "高德地图": "com.autonavi.minimap",
    "百度地图": "com.baidu.BaiduMap",
    "美团": "com.sankuai.meituan",
    "大众点评": "com.dianping.v1",
    "饿了么": "me.ele",
    "肯德基": "com.yek.android.kfc.activitys",
    "携程": "ctrip.android.view",
    "铁路12306": "com.MobileTicket",
    "12306": "com.MobileTicket",
    "去哪儿": "com.Qunar",
    "去哪儿旅行": "com.Qunar",
    "滴滴出行": "com.sdu.didi.psnger",
    "bilibili": "tv.danmaku.bili",
    "抖音": "com.ss.android.ugc.aweme",
    "快手": "com.smile.gifmaker",
    "腾讯视频": "com.tencent.qqlive",
    "爱奇艺": "com.qiyi.video",
    "优酷视频": "com.youku.phone",
    "芒果TV": "com.hunantv.imgo.activity",
    "红果短剧": "com.phoenix.read",
    "网易云音乐": "com.netease.cloudmusic",
    "QQ音乐": "com.tencent.qqmusic",
    "汽水音乐": "com.luna.music",
    "喜马拉雅": "com.ximalaya.ting.android",
    "番茄小说": "com.dragon.read",
    "番茄免费小说": "com.dragon.read",
    "七猫免费小说": "com.kmxs.reader",
    "飞书": "com.ss.android.lark",
    "QQ邮箱": "com.tencent.androidqqmail",
    "豆包": "com.larus.nova",
    "keep": "com.gotokeep.keep",
    "美柚": "com.lingan.seeyou",
    "腾讯新闻": "com.tencent.news",
    "今日头条": "com.ss.android.article.news",
    "贝壳找房": "com.lianjia.beike",
    "安居客": "com.anjuke.android.app",
    "同花顺": "com.hexin.plat.android",
    "星穹铁道": "com.miHoYo.hkrpg",
    "崩坏：星穹铁道": "com.miHoYo.hkrpg",
    "恋与深空": "com.papegames.lysk.cn",
    "AndroidSystemSettings": "com.android.settings",
    "Android System Settings": "com.android.settings",
    "Android  System Settings": "com.android.settings",
    "Android-System-Settings": "com.android.settings",
    "Settings": "com.android.settings",
    "AudioRecorder": "com.android.soundrecorder",
    "audiorecorder": "com.android.soundrecorder",
    "Bluecoins": "com.rammigsoftware.bluecoins",
    "bluecoins": "com.rammigsoftware.bluecoins",
    "Broccoli": "com.flauschcode.broccoli",
    "broccoli": "com.flauschcode.broccoli",
    "Booking.com": "com.booking",
    "Booking": "com.booking",
    "booking.com": "com.booking",
    "booking": "com.booking",
    "BOOKING.COM": "com.booking",
    "Chrome": "com.android.chrome",
    "chrome": "com.android.chrome",
    "Google Chrome": "com.android.chrome",
    "Clock": "com.android.deskclock",
    "clock": "com.android.deskclock",
    "Contacts": "com.android.contacts",
    "contacts": "com.android.contacts",
    "Duolingo": "com.duolingo",
    "duolingo": "com.duolingo",
    "Expedia": "com.expedia.bookings",
    "expedia": "com.expedia.bookings",
    "Files": "com.android.fileexplorer",
    "files": "com.android.fileexplorer",
    "File Manager": "com.android.fileexplorer",
    "file manager": "com.android.fileexplorer",
    "gmail": "com.google.android.gm",
    "Gmail": "com.google.android.gm",
    "GoogleMail": "com.google.android.gm",
    "Google Mail": "com.google.android.gm",
    "GoogleFiles": "com.google.android.apps.nbu.files",
    "googlefiles": "com.google.android.apps.nbu.files",
    "FilesbyGoogle": "com.google.android.apps.nbu.files",
    "GoogleCalendar": "com.google.android.calendar",
    "Google-Calendar": "com.google.android.calendar",
    "Google Calendar": "com.google.android.calendar",
    "google-calendar": "com.google.android.calendar",
    "google calendar": "com.google.android.calendar",
    "GoogleChat": "com.google.android.apps.dynamite",
    "Google Chat": "com.google.android.apps.dynamite",
    "Google-Chat": "com.google.android.apps.dynamite",
    "GoogleClock": "com.google.android.deskclock",
    "Google Clock": "com.google.android.deskclock",
    "Google-Clock": "com.google.android.deskclock",
    "GoogleContacts": "com.google.android.contacts",
    "Google-Contacts": "com.google.android.contacts",
    "Google Contacts": "com.google.android.contacts",
    "google-contacts": "com.google.android.contacts",
    "google contacts": "com.google.android.contacts",
    "GoogleDocs": "com.google.android.apps.docs.editors.docs",
    "Google Docs": "com.google.android.apps.docs.editors.docs",
    "googledocs": "com.google.android.apps.docs.editors.docs",
    "google docs": "com.google.android.apps.docs.editors.docs",
    "Google Drive": "com.google.android.apps.docs",
    "Google-Drive": "com.google.android.apps.docs",
    "google drive": "com.google.android.apps.docs",
    "google-drive": "com.google.android.apps.docs",
    "GoogleDrive": "com.google.android.apps.docs",
    "Googledrive": "com.google.android.apps.docs",
    "googledrive": "com.google.android.apps.docs",
    "GoogleFit": "com.google.android.apps.fitness",
    "googlefit": "com.google.android.apps.fitness",
    "GoogleKeep": "com.google.android.keep",
    "googlekeep": "com.google.android.keep",
    "GoogleMaps": "com.google.android.apps.maps",
    "Google Maps": "com.google.android.apps.maps",
    "googlemaps": "com.google.android.apps.maps",
    "google maps": "com.google.android.apps.maps",
    "Google Play Books": "com.google.android.apps.books",
    "Google-Play-Books": "com.google.android.apps.books",
    "google play books": "com.google.android.apps.books",
    "google-play-books": "com.google.android.apps.books",
    "GooglePlayBooks": "com.google.android.apps.books",
    "googleplaybooks": "com.google.android.apps.books",
    "GooglePlayStore": "com.android.vending",
    "Google Play Store": "com.android.vending",
    "Google-Play-Store": "com.android.vending",
    "GoogleSlides": "com.google.android.apps.docs.editors.slides",
    "Google Slides": "com.google.android.apps.docs.editors.slides",
    "Google-Slides": "com.google.android.apps.docs.editors.slides",
    "GoogleTasks": "com.google.android.apps.tasks",
    "Google Tasks": "com.google.android.apps.tasks",
    "Google-Tasks": "com.google.android.apps.tasks",
    "Joplin": "net.cozic.joplin",
    "joplin": "net.cozic.joplin",
    "McDonald": "com.mcdonalds.app",
    "mcdonald": "com.mcdonalds.app",
    "Osmand": "net.osmand",
    "osmand": "net.osmand",
    "PiMusicPlayer": "com.Project100Pi.themusicplayer",
    "pimusicplayer": "com.Project100Pi.themusicplayer",
    "Quora": "com.quora.android",
    "quora": "com.quora.android",
    "Reddit": "com.reddit.frontpage",
    "reddit": "com.reddit.frontpage",
    "RetroMusic": "code.name.monkey.retromusic",
    "retromusic": "code.name.monkey.retromusic",
    "SimpleCalendarPro": "com.scientificcalculatorplus.simplecalculator.basiccalculator.mathcalc",
    "SimpleSMSMessenger": "com.simplemobiletools.smsmessenger",
    "Telegram": "org.telegram.messenger",
    "temu": "com.einnovation.temu",
    "Temu": "com.einnovation.temu",
    "Tiktok": "com.zhiliaoapp.musically",
    "tiktok": "com.zhiliaoapp.musically",
    "Twitter": "com.twitter.android",
    "twitter": "com.twitter.android",
    "X": "com.twitter.android",
    "VLC": "org.videolan.vlc",
    "WeChat": "com.tencent.mm",
    "wechat": "com.tencent.mm",
    "Whatsapp": "com.whatsapp",
    "WhatsApp": "com.whatsapp",
}


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ValueError(f"lang {lang!r}: give one of {', '.join(LANGS)} (Open-AutoGLM's --lang)")
    return lang


def date_line(date: datetime.date | None = None, lang: str = "en") -> str:
    """The system prompt's first line, as the runtime writes it for ``date`` (default: today)."""
    day = date or datetime.date.today()
    if check_lang(lang) == "en":
        return EN_DATE_PREFIX + day.strftime("%Y-%m-%d, %A")
    return ZH_DATE_PREFIX + day.strftime("%Y年%m月%d日") + " " + _ZH_WEEKDAYS[day.weekday()]


def runtime_system_prompt(date: datetime.date | None = None, lang: str = "en") -> str:
    """The runtime's own system prompt in ``lang``, stamped with ``date`` (default: today): the screenshot form, which
    ``phone.conversation.system_prompt`` (the one builder of a conversation's system message) adapts to the text modes."""
    return date_line(date, lang) + (EN_PROMPT_BODY if lang == "en" else ZH_PROMPT_BODY)


def launch_package(app: str) -> str | None:
    """The package ``do(action="Launch", app=...)`` opens: the table's entry for exactly this name, else None (the
    runtime then reports "App not found" and the phone stays as it was)."""
    return APP_PACKAGES.get(app)


def current_app_name(focus: str | None, table: dict[str, str] | None = None) -> str:
    """The ``current_app`` the runtime reports for the focused window's line (or its package): the first name of the
    table (``APP_PACKAGES`` unless given) whose package is in it, else "System Home"."""
    if focus:
        for name, package in (APP_PACKAGES if table is None else table).items():
            if package in focus:
                return name
    return HOME


ACTION_MARKERS = ("finish(message=", "do(action=")  # where the runtime's client cuts a reply


def runtime_split(content: str) -> tuple[str, str]:
    """(thinking, action text) of a reply's content, by the runtime client's rules: everything from the first
    ``finish(message=`` (else ``do(action=``) on is the action and what precedes it, stripped, the thinking (tags
    and all); else, with an ``<answer>`` tag, the tags are dropped; else the whole content is the action."""
    for marker in ACTION_MARKERS:
        if marker in content:
            before, after = content.split(marker, 1)
            return before.strip(), marker + after
    if "<answer>" in content:
        before, after = content.split("<answer>", 1)
        return before.replace("<think>", "").replace("</think>", "").strip(), after.replace("</answer>", "").strip()
    return "", content


def reply_action(content: str | None) -> Action | None:
    """The action a model's reply holds as Open-AutoGLM's runtime reads it (everything from ``do(action=`` /
    ``finish(message=`` on: ``runtime_split``; a reasoning the server split off never reaches it);
    None when that is not one valid action (a reply closed by ``</answer>`` is not). For readers that only need the
    action; those that report why call ``parse_action``."""
    try:
        return parse_action(runtime_split(content or "")[1])
    except ActionSyntaxError:
        return None


def history_reply(content: str) -> str:
    """The assistant turn the runtime keeps in its history for a reply: ``<think>{thinking}</think><answer>{action}
    </answer>`` of ``runtime_split``."""
    thinking, action = runtime_split(content)
    return f"<think>{thinking}</think><answer>{action}</answer>"


# How the runtime's handler (phone_agent/actions/handler.py) treats what its parser returns: the do() actions it
# carries out, each with the arguments it reads; any other action name (Note, Call_API, Interact and Take_over
# among them) it answers "Unknown action" or with a placeholder, and the episode goes on.
_POINTED = ("Tap", "Double Tap", "Long Press")
TOUCH_SIZE = (1080, 2400)  # the pixels the runtime's gestures are sent in (agent.openautoglm.SimDevice reports them)


def _touch_point(value, size: tuple[int, int] = TOUCH_SIZE) -> list | None:
    """A point as the runtime's handler turns it into pixels (``int(v / 1000 * size)``) and the grid point of those
    pixels (exact at >= 1000 pixels a side; one off the screen stays off it); None where the handler fails on it."""
    try:
        pixels = [int(value[0] / 1000 * size[0]), int(value[1] / 1000 * size[1])]
    except (TypeError, IndexError, KeyError):
        return None
    return [grid_point(p, s) for p, s in zip(pixels, size)]


def grid_point(pixel: int, size: int) -> int:
    """The 0-999 grid point the runtime turned into ``pixel`` (``int(v / 1000 * size)``): the smallest such, which is
    the only one when ``size`` >= 1000; a pixel off the screen gives a point off the grid (it hits nothing)."""
    return -(-pixel * 1000 // size)


def _handled(kwargs: dict):
    """The Action the runtime's handler carries out for a parsed do(...) call; None where it does nothing."""
    name = kwargs.get("action")
    if name in _POINTED:
        point = _touch_point(kwargs["element"]) if kwargs.get("element") else None
        return Action(name, {"element": point}) if point else None
    if name == "Swipe":
        start, end = (_touch_point(kwargs[k]) if kwargs.get(k) else None for k in ("start", "end"))
        return Action("Swipe", {"start": start, "end": end}) if start and end else None
    if name in ("Type", "Type_Name"):
        text = kwargs.get("text", "")
        return Action("Type", {"text": text}) if isinstance(text, str) else None
    if name == "Launch":
        app = kwargs.get("app")
        return Action("Launch", {"app": app}) if app and isinstance(app, str) else None
    if name in ("Back", "Home"):
        return Action(name)
    if name == "Wait":
        duration = kwargs.get("duration", "1 seconds")
        return Action("Wait", {"duration": duration}) if isinstance(duration, str) else None
    return None  # an action it does not know, or one it only answers (Note, Call_API, Interact, Take_over)


def wait_seconds(duration: str) -> float:
    """How long the runtime's handler sleeps for a Wait of ``duration`` ("x seconds"; 1 where that is no number)."""
    try:
        return max(0.0, float(duration.replace("seconds", "").strip()))
    except ValueError:
        return 1.0


def runtime_action(text: str):
    """What Open-AutoGLM's runtime does with an action text (the part its client cut out: ``runtime_split``), read by
    its parser and carried out by its handler: the ``Action`` it performs (points turned through its pixels; one off
    the screen stays off it), None for a call its handler does nothing with (an action it does not know, a missing
    argument: the episode goes on), ``finish`` for any text starting with ``finish`` (the message its slice gives).
    ``ActionSyntaxError`` where its parser raises: the runtime then finishes with the text as the message."""
    import ast

    source = text.strip()
    if source.startswith(('do(action="Type"', 'do(action="Type_Name"')):
        if "text=" not in source:
            raise ActionSyntaxError("a Type call without text=")
        return Action("Type", {"text": source.split("text=", 1)[1][1:-2]})
    if source.startswith("do"):
        escaped = source.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        try:
            call = ast.parse(escaped, mode="eval").body
            if not isinstance(call, ast.Call):
                raise ActionSyntaxError("not a call")
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as err:
            raise ActionSyntaxError(f"the runtime's parser fails on it: {err}") from None
        return _handled(kwargs)
    if source.startswith("finish"):
        return Action("finish", {"message": source.replace("finish(message=", "")[1:-2]})
    raise ActionSyntaxError("neither do(...) nor finish(...)")
