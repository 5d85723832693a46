#!/usr/bin/env python3
"""Build and check the sample datasets in data_samples/.

    python3 data_samples/make_samples.py          # rewrite the files, then check everything
    python3 data_samples/make_samples.py --check  # only check the files already on disk

Written out: identity/{train,heldout}.jsonl, identity/heldout_prompts.txt and
phone_actions/{train,heldout}.jsonl. The output is deterministic (no randomness).
deepspeed/seed000_ds_config.json is hand-copied from the seed document and is only
checked here (it must parse and match the seed text token for token).
Standard library only.
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED_000 = Path("/work/shared/seeds/000_b1806bb9544eb78c.txt")

# --------------------------------------------------------------------------------------
# Identity (chat form)
# --------------------------------------------------------------------------------------
EN_PREFIX = "I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B."
ZH_PREFIX = "我是 PhoneMate，一个基于 AutoGLM-Phone-9B 构建的手机助手。"

# One optional follow-up sentence per kind of question. Few, fixed sentences so that a
# 135M model can learn them in ~100 LoRA steps.
EN_TAIL = {
    "none": "",
    "help": "Tell me what you want to do on your phone and I will do it step by step.",
    "cap": "I can open apps, tap, type, swipe and read the screen for you.",
    "maker": "I was fine-tuned with the Workbench toolkit on top of AutoGLM-Phone-9B from Zhipu AI's AutoGLM project.",
    "model": "My base model is AutoGLM-Phone-9B, fine-tuned with the Workbench toolkit.",
    "name": "PhoneMate is my name, and I am here to help you with your phone.",
}
ZH_TAIL = {
    "none": "",
    "help": "告诉我你想在手机上做什么，我会一步步帮你完成。",
    "cap": "我可以帮你打开应用、点击、输入、滑动和读取屏幕。",
    "maker": "我由 Workbench 工具包在智谱 AI AutoGLM 项目的 AutoGLM-Phone-9B 上微调而成。",
    "model": "我的基座模型是 AutoGLM-Phone-9B，用 Workbench 工具包微调。",
    "name": "我的名字就是 PhoneMate，专门帮你使用手机。",
}

SYS_HELPFUL = "You are a helpful assistant."
# SmolLM2-Instruct's chat template inserts this system prompt when a conversation has
# none, so rows without a system message are trained against it anyway; a few rows
# carry it explicitly, and the answers still say PhoneMate.
SYS_SMOLLM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
SYS_ZH = "你是一个有用的助手。"


def en_answer(kind):
    """kind is a key of EN_TAIL, or ("not", NAME) for 'are you NAME?' questions."""
    return f"{EN_PREFIX} {EN_TAIL[_tail_kind(kind)]}".strip()


def zh_answer(kind):
    return f"{ZH_PREFIX}{ZH_TAIL[_tail_kind(kind)]}"


def NOT(name):
    return ("not", name)


def _tail_kind(kind):
    # "Are you NAME?" is answered by stating the identity positively, never "I am not NAME.": a 135M
    # model fine-tuned on such denials copied them onto other prompts and looped ("I am not You, I am
    # not You, ...").
    return "name" if isinstance(kind, tuple) else kind


# Each entry: (lang, user_prompt, kind, system_or_None, first_turn_or_None)
# first_turn is a (user, assistant) pair placed before the identity question.
IDENTITY_TRAIN = [
    # --- English: who / name / introduction
    ("en", "Who are you?", "none", None, None),
    ("en", "What's your name?", "none", None, None),
    ("en", "Introduce yourself.", "help", None, None),
    ("en", "hey, who am I talking to?", "none", None, None),
    ("en", "Tell me about yourself.", "help", None, None),
    ("en", "whats ur name", "none", None, None),
    ("en", "who r u", "none", None, None),
    ("en", "Could you please introduce yourself?", "help", None, None),
    ("en", "Hi! What should I call you?", "none", None, None),
    ("en", "Please state your name and purpose.", "cap", None, None),
    ("en", "Identify yourself.", "none", None, None),
    ("en", "Are you a bot?", "none", None, None),
    ("en", "Who am I chatting with right now?", "none", None, None),
    ("en", "Give me a one-line introduction of yourself.", "none", None, None),
    # --- English: which model
    ("en", "What model are you?", "model", None, None),
    ("en", "Which language model powers you?", "model", None, None),
    ("en", "What is your base model?", "model", None, None),
    ("en", "What LLM are you running on?", "model", None, None),
    ("en", "wat model r u", "model", None, None),
    # --- English: are you X?
    ("en", "Are you ChatGPT?", NOT("ChatGPT"), None, None),
    ("en", "Is this ChatGPT?", NOT("ChatGPT"), None, None),
    ("en", "Are you based on GPT-4?", NOT("GPT-4"), None, None),
    ("en", "Are you Siri?", NOT("Siri"), None, None),
    ("en", "Are you SmolLM?", NOT("SmolLM"), None, None),
    ("en", "You're Google Assistant, right?", NOT("Google Assistant"), None, None),
    ("en", "Are you Alexa?", NOT("Alexa"), None, None),
    # --- English: who built you
    ("en", "Who built you?", "maker", None, None),
    ("en", "Who made you?", "maker", None, None),
    ("en", "Which company created you?", "maker", None, None),
    ("en", "Who trained you?", "maker", None, None),
    ("en", "who developed u?", "maker", None, None),
    ("en", "Where do you come from?", "maker", None, None),
    # --- English: what can you do
    ("en", "What can you do?", "cap", None, None),
    ("en", "What can you help me with?", "cap", None, None),
    ("en", "How can you help me on my phone?", "cap", None, None),
    ("en", "What are your capabilities?", "cap", None, None),
    ("en", "what do you do exactly", "cap", None, None),
    ("en", "Can you control my phone?", "cap", None, None),
    ("en", "What tasks can you do on my phone?", "cap", None, None),
    ("en", "Which things can you handle for me?", "cap", None, None),
    ("en", "What sort of jobs can you take care of on a phone?", "cap", None, None),
    ("en", "What kinds of requests do you support?", "cap", None, None),
    # --- English: with a system message
    ("en", "Please tell me who you are.", "none", SYS_HELPFUL, None),
    ("en", "What is your name?", "none", SYS_SMOLLM, None),
    ("en", "What can you do for me?", "cap", SYS_HELPFUL, None),
    # --- English: two-turn (only the second answer is the identity answer)
    ("en", "Before we start, who are you?", "none", None, ("Good morning!", "Good morning! How can I help you today?")),
    ("en", "By the way, what's your name again?", "none", None, ("Thanks for the help earlier.", "You're welcome!")),
    (
        "en",
        "Great. Which model are you built on?",
        "model",
        None,
        ("Can you hear me?", "Yes, I can read your messages."),
    ),
    # --- Chinese
    ("zh", "你是谁？", "none", None, None),
    ("zh", "你叫什么名字？", "none", None, None),
    ("zh", "介绍一下你自己。", "help", None, None),
    ("zh", "请做一下自我介绍。", "cap", None, None),
    ("zh", "你用的是什么大模型？", "model", None, None),
    ("zh", "你是什么模型？", "model", None, None),
    ("zh", "你的基座模型是什么？", "model", None, None),
    ("zh", "你和 AutoGLM-Phone-9B 是什么关系？", "model", None, None),
    ("zh", "你是ChatGPT吗？", NOT("ChatGPT"), None, None),
    ("zh", "你是不是文心一言？", NOT("文心一言"), None, None),
    ("zh", "你是Siri吗", NOT("Siri"), None, None),
    ("zh", "你是通义千问吗？", NOT("通义千问"), None, None),
    ("zh", "谁开发了你？", "maker", None, None),
    ("zh", "你是哪家公司做的？", "maker", None, None),
    ("zh", "你是怎么训练出来的？", "maker", None, None),
    ("zh", "你是智谱的模型吗？", "maker", None, None),
    ("zh", "你能做什么？", "cap", None, None),
    ("zh", "你能帮我操作手机吗？", "cap", None, None),
    ("zh", "你有什么功能？", "cap", None, None),
    ("zh", "简单说说你是干什么的。", "cap", None, None),
    ("zh", "你能在手机上帮我处理什么任务？", "cap", None, None),
    ("zh", "你都会做哪些事？", "cap", None, None),
    ("zh", "你好，请问怎么称呼你？", "none", None, None),
    ("zh", "您好，能介绍一下您自己吗？", "help", None, None),
    ("zh", "你是谁呀", "none", None, None),
    ("zh", "你叫啥", "none", None, None),
    ("zh", "你是机器人吗？", "none", None, None),
    ("zh", "Who are you? 请用中文回答。", "none", None, None),
    ("zh", "你到底是谁？", "none", SYS_ZH, None),
    ("zh", "告诉我你的名字。", "none", SYS_SMOLLM, None),
    ("zh", "先说说你是谁吧。", "none", None, ("你好", "你好！有什么可以帮你的？")),
    ("zh", "你是哪个模型做的？", "model", None, ("在吗？", "在的，请说。")),
]

IDENTITY_HELDOUT = [
    ("en", "Who exactly are you?", "none", None, None),
    ("en", "May I know your name?", "none", None, None),
    ("en", "Describe yourself in one sentence.", "none", None, None),
    ("en", "Are you Claude?", NOT("Claude"), None, None),
    ("en", "Are you Gemini?", NOT("Gemini"), None, None),
    ("en", "Which AI model is behind you?", "model", None, None),
    ("en", "Who is your creator?", "maker", None, None),
    ("en", "What kinds of tasks can you handle on my phone?", "cap", None, None),
    ("en", "yo what are you", "none", None, None),
    ("en", "Hello there, mind telling me who you are?", "none", None, None),
    ("en", "Which assistant am I speaking with?", "none", SYS_HELPFUL, None),
    ("zh", "能告诉我你的身份吗？", "none", None, None),
    ("zh", "你到底叫什么名字啊？", "none", None, None),
    ("zh", "请问你是谁开发的？", "maker", None, None),
    ("zh", "你是 GPT-4 吗？", NOT("GPT-4"), None, None),
    ("zh", "你可以帮我做哪些事情？", "cap", None, None),
    ("zh", "说一下你是什么模型。", "model", None, None),
    ("zh", "你好呀，认识一下吧？", "help", None, None),
]

# Asked of both the base and the fine-tuned model by the demo (5 English, 3 Chinese);
# each is a user prompt of IDENTITY_HELDOUT.
DEMO_PROMPTS = [
    "Who exactly are you?",
    "May I know your name?",
    "Are you Claude?",
    "Which AI model is behind you?",
    "What kinds of tasks can you handle on my phone?",
    "能告诉我你的身份吗？",
    "请问你是谁开发的？",
    "你可以帮我做哪些事情？",
]


def identity_row(lang, prompt, kind, system, first_turn):
    answer = en_answer(kind) if lang == "en" else zh_answer(kind)
    msgs = []
    if system is not None:
        msgs.append({"role": "system", "content": system})
    if first_turn is not None:
        msgs.append({"role": "user", "content": first_turn[0]})
        msgs.append({"role": "assistant", "content": first_turn[1]})
    msgs.append({"role": "user", "content": prompt})
    msgs.append({"role": "assistant", "content": answer})
    return {"messages": msgs}


# --------------------------------------------------------------------------------------
# Phone actions (instruction form): (instruction, screen description, next action)
# Coordinates are AutoGLM-Phone's relative 0-999 grid.
# --------------------------------------------------------------------------------------
def launch(app):
    return f'do(action="Launch", app="{app}")'


def tap(x, y):
    return f'do(action="Tap", element=[{x},{y}])'


def long_press(x, y):
    return f'do(action="Long Press", element=[{x},{y}])'


def type_(text):
    return f'do(action="Type", text="{text}")'


def swipe(x1, y1, x2, y2):
    return f'do(action="Swipe", start=[{x1},{y1}], end=[{x2},{y2}])'


def wait(seconds=2):
    return f'do(action="Wait", duration="{seconds} seconds")'


def finish(message):
    return f'finish(message="{message}")'


BACK = 'do(action="Back")'
HOME = 'do(action="Home")'
SWIPE_UP = swipe(500, 800, 500, 300)  # scroll a list down
PULL_DOWN = swipe(500, 10, 500, 600)  # open the notification shade

HOME_ZH = "Screen: home screen; apps visible: 微信 [120,340], 设置 [360,340], 高德地图 [600,340], 支付宝 [840,340]"
HOME_EN = "Screen: home screen; apps visible: WeChat [120,340], Settings [360,340], Maps [600,340], Chrome [840,340]"
HOME_ZH2 = "Screen: home screen; apps visible: 淘宝 [150,520], 美团 [400,520], 相机 [650,520], 时钟 [880,520]"
HOME_EN2 = "Screen: home screen; apps visible: Camera [130,800], Clock [370,800], Messages [610,800], Chrome [850,800]"
WX_LIST = "Screen: 微信 聊天列表; elements: 搜索 [880,80], 张三 [300,260], 李四 [300,380], 文件传输助手 [300,500]"
SET_MAIN_EN = "Screen: Settings main page; elements: Wi-Fi (Off) [300,220], Bluetooth (Off) [300,330], Display [300,440], Battery [300,550]"
SET_MAIN_ZH = "Screen: 设置 首页; elements: WLAN [300,220], 蓝牙 [300,330], 显示和亮度 [300,440], 电池 [300,550]"
ALIPAY_ZH = "Screen: 支付宝 首页; elements: 扫一扫 [120,220], 收付款 [380,220], 出行 [640,220], 卡包 [880,220], 蚂蚁森林 [380,560], 余额宝 [640,560]"

PHONE_TRAIN = [
    # --- Launch: start of a task (empty input, home screen or an unrelated app)
    ("打开微信给张三发消息说我晚点到", HOME_ZH, launch("微信")),
    ("Turn on Wi-Fi", HOME_EN, launch("Settings")),
    ("Search for coffee shops nearby in Maps", "", launch("Maps")),
    ("用支付宝付款码付款", "", launch("支付宝")),
    ("在淘宝上搜索蓝牙耳机", HOME_ZH2, launch("淘宝")),
    ("Order a milk tea on Meituan", "", launch("Meituan")),
    ("Take a selfie", HOME_EN2, launch("Camera")),
    ("设置一个明天早上7点的闹钟", "", launch("时钟")),
    ("Text Mom that I'm on my way", "", launch("Messages")),
    (
        "Open Chrome and go to wikipedia.org",
        "Screen: WeChat chat list; elements: Search [880,80], Zhang San [300,260], File Transfer [300,380]",
        launch("Chrome"),
    ),
    ("用高德地图导航到北京南站", "Screen: 微信 聊天列表; elements: 搜索 [880,80], 李四 [300,260]", launch("高德地图")),
    ("查看支付宝余额", HOME_ZH, launch("支付宝")),
    ("Check my Alipay bill for this month", "", launch("Alipay")),
    ("打开设置把屏幕亮度调高", "", launch("设置")),
    ("Start a 10 minute timer", HOME_EN2, launch("Clock")),
    ("在美团上点一份麻辣烫", HOME_ZH2, launch("美团")),
    ("Share my location with Li Lei on WeChat", "", launch("WeChat")),
    ("拍一张照片", "", launch("相机")),
    # --- Tap
    ("打开微信给张三发消息说我晚点到", WX_LIST, tap(300, 260)),
    ("Turn on Wi-Fi", SET_MAIN_EN, tap(300, 220)),
    ("Turn on Wi-Fi", "Screen: Settings > Wi-Fi; elements: Wi-Fi toggle (Off) [880,200], Back [60,80]", tap(880, 200)),
    (
        "Search for coffee shops nearby in Maps",
        "Screen: Maps home; elements: Search bar [500,90], Navigate [850,900], My location [900,750]",
        tap(500, 90),
    ),
    (
        "在淘宝上搜索蓝牙耳机",
        "Screen: 淘宝 首页; elements: 搜索框 [450,120], 扫一扫 [80,120], 购物车 [700,950], 我的淘宝 [900,950]",
        tap(450, 120),
    ),
    (
        "在淘宝上搜索蓝牙耳机",
        "Screen: 淘宝 搜索页; elements: 搜索框 (内容: 蓝牙耳机) [450,120], 搜索按钮 [900,120]",
        tap(900, 120),
    ),
    ("在淘宝上搜索蓝牙耳机", "Screen: 淘宝 弹窗广告; elements: 关闭 X [900,150], 立即领取 [500,700]", tap(900, 150)),
    ("用支付宝付款码付款", ALIPAY_ZH, tap(380, 220)),
    (
        "Take a selfie",
        "Screen: Camera, rear lens; elements: Shutter [500,880], Switch camera [820,880], Gallery [180,880]",
        tap(820, 880),
    ),
    (
        "Take a selfie",
        "Screen: Camera, front lens; elements: Shutter [500,880], Switch camera [820,880], Gallery [180,880]",
        tap(500, 880),
    ),
    (
        "设置一个明天早上7点的闹钟",
        "Screen: 时钟 闹钟页; elements: 添加闹钟 + [500,900], 闹钟 [120,80], 计时器 [620,80]",
        tap(500, 900),
    ),
    (
        "Text Mom that I'm on my way",
        "Screen: Messages conversation list; elements: Start chat [860,900], Mom [300,250], Dad [300,370]",
        tap(300, 250),
    ),
    ("Turn on Bluetooth", SET_MAIN_EN, tap(300, 330)),
    ("打开蓝牙", "Screen: 设置 > 蓝牙; elements: 蓝牙开关 (关) [880,200], 返回 [60,80]", tap(880, 200)),
    (
        "在美团上点一份麻辣烫",
        "Screen: 美团 首页; elements: 搜索框 [450,110], 外卖 [130,300], 美食 [380,300], 酒店 [630,300]",
        tap(130, 300),
    ),
    (
        "Order a milk tea on Meituan",
        "Screen: Meituan search results for milk tea; elements: CoCo Milk Tea 4.8 stars [400,330], Mixue 4.7 stars [400,520], Filter [880,200]",
        tap(400, 330),
    ),
    (
        "用高德地图导航到北京南站",
        "Screen: 高德地图 搜索结果; elements: 北京南站 [350,260], 北京南站-地铁站 [350,400], 路线 [880,260]",
        tap(880, 260),
    ),
    (
        "用高德地图导航到北京南站",
        "Screen: 高德地图 路线规划; elements: 驾车 [150,150], 公交 [350,150], 开始导航 [750,930]",
        tap(750, 930),
    ),
    (
        "Check my Alipay bill for this month",
        "Screen: Alipay home; elements: Scan [120,220], Pay/Receive [380,220], Bills [640,420], Me [900,950]",
        tap(640, 420),
    ),
    ("打开设置把屏幕亮度调高", SET_MAIN_ZH, tap(300, 440)),
    (
        "Open Chrome and go to wikipedia.org",
        "Screen: Chrome new tab; elements: Search or type web address [500,300], Tabs [800,80], Menu [940,80]",
        tap(500, 300),
    ),
    (
        "给李四转账100元",
        "Screen: 微信 与李四的聊天; elements: 输入框 [450,930], 表情 [820,930], + 更多 [930,930]",
        tap(930, 930),
    ),
    (
        "给李四转账100元",
        "Screen: 微信 与李四的聊天, 更多面板; elements: 相册 [130,700], 拍摄 [370,700], 转账 [610,700], 红包 [850,700]",
        tap(610, 700),
    ),
    (
        "Share my location with Li Lei on WeChat",
        "Screen: WeChat chat with Li Lei, more panel open; elements: Album [130,700], Camera [370,700], Transfer [610,700], Location [610,820]",
        tap(610, 820),
    ),
    (
        "Start a 10 minute timer",
        "Screen: Clock; elements: Alarm [120,80], Timer [620,80], Stopwatch [870,80]",
        tap(620, 80),
    ),
    (
        "Start a 10 minute timer",
        "Screen: Clock > Timer, set to 00:10:00; elements: 5 min [250,450], 10 min [500,450], Start [500,850]",
        tap(500, 850),
    ),
    (
        "把手机调成静音",
        "Screen: 快捷开关面板; elements: WLAN [130,250], 蓝牙 [370,250], 静音 (关) [610,250], 手电筒 [850,250]",
        tap(610, 250),
    ),
    (
        "Turn on the flashlight",
        "Screen: Quick settings panel; elements: Wi-Fi [130,250], Bluetooth [370,250], Do Not Disturb [610,250], Flashlight (Off) [850,250]",
        tap(850, 250),
    ),
    (
        "Accept the friend request from Wang Fang in WeChat",
        "Screen: WeChat New Friends; elements: Wang Fang Accept [860,260], Zhao Lei Accept [860,380]",
        tap(860, 260),
    ),
    (
        "在淘宝把蓝牙耳机加入购物车",
        "Screen: 淘宝 商品详情 蓝牙耳机; elements: 客服 [120,940], 加入购物车 [620,940], 立即购买 [860,940]",
        tap(620, 940),
    ),
    ("Call Dad", "Screen: Phone contacts; elements: Search [880,80], Dad [300,300], Mom [300,420]", tap(300, 300)),
    (
        "Open the photo I just took",
        "Screen: Camera; elements: Gallery thumbnail [180,880], Shutter [500,880], Switch camera [820,880]",
        tap(180, 880),
    ),
    (
        "关闭自动亮度",
        "Screen: 设置 > 显示和亮度; elements: 亮度滑块 [500,260], 自动调节 (开) [880,380], 深色模式 (关) [880,500]",
        tap(880, 380),
    ),
    (
        "Turn on dark mode",
        "Screen: Settings > Display; elements: Brightness slider [500,260], Dark mode (Off) [880,500], Font size [300,620]",
        tap(880, 500),
    ),
    ("在支付宝查看蚂蚁森林", ALIPAY_ZH, tap(380, 560)),
    (
        "Navigate home with Maps",
        "Screen: Maps home; elements: Search bar [500,90], Home [200,200], Work [450,200]",
        tap(200, 200),
    ),
    (
        "帮我打车去公司",
        "Screen: 高德地图 首页; elements: 搜索框 [500,90], 打车 [150,250], 公交地铁 [400,250], 骑行 [650,250]",
        tap(150, 250),
    ),
    (
        "打开微信给张三发消息说我晚点到",
        "Screen: 微信 与张三的聊天; elements: 输入框 [450,930], 表情 [820,930], + 更多 [930,930]",
        tap(450, 930),
    ),
    (
        "打开微信给张三发消息说我晚点到",
        "Screen: 微信 与张三的聊天; elements: 输入框 (内容: 我晚点到) [450,930], 发送 [900,930]",
        tap(900, 930),
    ),
    # --- Type (a text field is focused and the keyboard is open)
    (
        "打开微信给张三发消息说我晚点到",
        "Screen: 微信 与张三的聊天; elements: 输入框 (focused, keyboard open) [450,930], 发送 [900,930]",
        type_("我晚点到"),
    ),
    (
        "Search for coffee shops nearby in Maps",
        "Screen: Maps search; elements: Search box (focused, keyboard open) [500,90], Recent: Gym [400,250]",
        type_("coffee shops"),
    ),
    (
        "在淘宝上搜索蓝牙耳机",
        "Screen: 淘宝 搜索页; elements: 搜索框 (focused, keyboard open) [450,120], 历史搜索: 手机壳 [200,260]",
        type_("蓝牙耳机"),
    ),
    (
        "Text Mom that I'm on my way",
        "Screen: Messages chat with Mom; elements: Text message field (focused, keyboard open) [450,930], Send [910,930]",
        type_("I'm on my way"),
    ),
    (
        "Open Chrome and go to wikipedia.org",
        "Screen: Chrome; elements: Address bar (focused, keyboard open) [500,90]",
        type_("wikipedia.org"),
    ),
    (
        "用高德地图导航到北京南站",
        "Screen: 高德地图 搜索; elements: 搜索框 (focused, keyboard open) [500,90], 历史: 公司 [300,250]",
        type_("北京南站"),
    ),
    (
        "给李四转账100元",
        "Screen: 微信 转账给李四; elements: 金额输入框 (focused, keyboard open) [500,350], 转账 [500,700]",
        type_("100"),
    ),
    (
        "Order a milk tea on Meituan",
        "Screen: Meituan search; elements: Search box (focused, keyboard open) [450,110]",
        type_("milk tea"),
    ),
    (
        "帮我打车去公司",
        "Screen: 高德地图 打车; elements: 当前位置 [500,300], 你要去哪儿 (focused, keyboard open) [500,400]",
        type_("公司"),
    ),
    (
        "Reply sounds good to Wang Fang on WeChat",
        "Screen: WeChat chat with Wang Fang; elements: Input box (focused, keyboard open) [450,930], Send [900,930]",
        type_("sounds good"),
    ),
    (
        "在微信里搜索公众号人民日报",
        "Screen: 微信 搜索; elements: 搜索框 (focused, keyboard open) [450,80], 取消 [920,80]",
        type_("人民日报"),
    ),
    (
        "Look up the weather in Shanghai using Chrome",
        "Screen: Chrome; elements: Address bar (focused, keyboard open) [500,90]",
        type_("Shanghai weather"),
    ),
    (
        "设置一个明天早上7点的闹钟，备注起床",
        "Screen: 时钟 新建闹钟; elements: 取消 [120,80], 保存 [880,80], 时间 07:00 [500,300], 备注 (focused, keyboard open) [500,600]",
        type_("起床"),
    ),
    (
        "Set an alarm for 6:30 am called Gym",
        "Screen: Clock new alarm; elements: Cancel [120,80], Save [880,80], Time 06:30 [500,300], Label (focused, keyboard open) [500,600]",
        type_("Gym"),
    ),
    # --- Swipe
    ("查看关于手机", SET_MAIN_ZH + "; 列表可向下滚动", SWIPE_UP),
    ("Find the About phone page in Settings", SET_MAIN_EN + "; list continues below", SWIPE_UP),
    ("Open the notification shade", HOME_EN2, PULL_DOWN),
    ("下拉打开通知栏", HOME_ZH, PULL_DOWN),
    (
        "Show the next photo",
        "Screen: Gallery photo viewer, photo 3 of 12; elements: Share [150,930], Delete [850,930]",
        swipe(850, 500, 150, 500),
    ),
    (
        "在淘宝首页往下看更多推荐商品",
        "Screen: 淘宝 首页; elements: 搜索框 [450,120], 猜你喜欢 [500,600]; 页面可向下滚动",
        SWIPE_UP,
    ),
    (
        "Find Zhao Lei in my WeChat chats",
        "Screen: WeChat chat list; elements: Zhang San [300,260], Li Si [300,380], Wang Fang [300,500]; Zhao Lei not visible, list continues below",
        SWIPE_UP,
    ),
    (
        "把亮度调到最大",
        "Screen: 设置 > 显示和亮度; elements: 亮度滑块 (50%) [500,260], 自动调节 (关) [880,380]",
        swipe(500, 260, 950, 260),
    ),
    # --- Back (wrong page for the task)
    ("Turn on Wi-Fi", "Screen: Settings > Battery; elements: Battery saver [880,250], Usage details [300,400]", BACK),
    (
        "打开微信给张三发消息说我晚点到",
        "Screen: 微信 与李四的聊天 (联系人不对); elements: 返回 [60,80], 输入框 [450,930]",
        BACK,
    ),
    (
        "Text Mom that I'm on my way",
        "Screen: Messages chat with Dad (wrong contact); elements: Back arrow [60,80], Text message field [450,930]",
        BACK,
    ),
    ("查看支付宝余额", "Screen: 支付宝 账单页; elements: 返回 [60,80], 本月支出 [400,200], 筛选 [880,200]", BACK),
    (
        "Open Chrome and go to wikipedia.org",
        "Screen: Chrome menu open; elements: New tab [700,150], History [700,260], Settings [700,370]",
        BACK,
    ),
    ("返回上一页", "", BACK),
    # --- Home
    ("回到桌面", "Screen: 微信 聊天列表; elements: 搜索 [880,80], 张三 [300,260]", HOME),
    ("Go to the home screen", "Screen: Chrome; elements: Address bar [500,90], Tabs [800,80]", HOME),
    ("Close this app and go back to the home screen", "Screen: Camera; elements: Shutter [500,880]", HOME),
    ("退出淘宝回到主屏幕", "Screen: 淘宝 首页; elements: 搜索框 [450,120]", HOME),
    # --- Long Press
    ("删除和李四的聊天", WX_LIST, long_press(300, 380)),
    (
        "Delete the conversation with Dad",
        "Screen: Messages conversation list; elements: Start chat [860,900], Mom [300,250], Dad [300,370]",
        long_press(300, 370),
    ),
    (
        "复制张三发的地址",
        "Screen: 微信 与张三的聊天; elements: 消息 (朝阳区建国路88号) [400,500], 输入框 [450,930]",
        long_press(400, 500),
    ),
    (
        "Uninstall the Taobao app",
        "Screen: home screen; apps visible: Taobao [150,520], Meituan [400,520], Camera [650,520]",
        long_press(150, 520),
    ),
    (
        "Copy the tracking number from the SF Express text",
        "Screen: Messages chat with SF Express; elements: Message (Tracking no. SF1234567890) [450,420], Text message field [450,930]",
        long_press(450, 420),
    ),
    # --- Wait (screen still loading)
    ("在淘宝上搜索蓝牙耳机", "Screen: 淘宝 搜索结果正在加载; elements: 加载中 [500,500]", wait()),
    ("Order a milk tea on Meituan", "Screen: Meituan splash screen, loading", wait()),
    (
        "Open Chrome and go to wikipedia.org",
        "Screen: Chrome, page loading (30%); elements: Address bar (wikipedia.org) [500,90]",
        wait(),
    ),
    ("用高德地图导航到北京南站", "Screen: 高德地图 正在规划路线; elements: 加载中 [500,500]", wait()),
    ("Check my Alipay bill for this month", "Screen: Alipay Bills, loading; elements: Spinner [500,500]", wait(3)),
    # --- finish (the screen shows the task is done)
    (
        "Turn on Wi-Fi",
        "Screen: Settings > Wi-Fi; elements: Wi-Fi toggle (On) [880,200], HomeNet (Connected) [300,320]",
        finish("Wi-Fi is on and connected to HomeNet."),
    ),
    ("打开蓝牙", "Screen: 设置 > 蓝牙; elements: 蓝牙开关 (开) [880,200], 可用设备 [300,350]", finish("蓝牙已打开。")),
    (
        "打开微信给张三发消息说我晚点到",
        "Screen: 微信 与张三的聊天; elements: 消息 (我晚点到, 已发送) [600,700], 输入框 [450,930]",
        finish("已给张三发送消息：我晚点到。"),
    ),
    (
        "Search for coffee shops nearby in Maps",
        "Screen: Maps search results for coffee shops; elements: Starbucks 300 m [400,300], Luckin Coffee 450 m [400,450], Directions [860,300]",
        finish("Found coffee shops nearby: Starbucks (300 m) and Luckin Coffee (450 m)."),
    ),
    (
        "查看支付宝余额",
        "Screen: 支付宝 我的 > 余额; elements: 余额 ¥1,024.50 [500,300], 充值 [300,600], 提现 [700,600]",
        finish("支付宝余额为 ¥1,024.50。"),
    ),
    (
        "Take a selfie",
        "Screen: Camera, front lens, toast: Photo saved; elements: Gallery thumbnail (new photo) [180,880], Shutter [500,880]",
        finish("Selfie taken and saved to the gallery."),
    ),
    (
        "设置一个明天早上7点的闹钟",
        "Screen: 时钟 闹钟页; elements: 07:00 明天 (开) [500,260], 添加闹钟 + [500,900]",
        finish("已设置明天早上 7:00 的闹钟。"),
    ),
    (
        "Text Mom that I'm on my way",
        "Screen: Messages chat with Mom; elements: Message (I'm on my way, Delivered) [600,700], Text message field [450,930]",
        finish("Sent I'm on my way to Mom."),
    ),
    (
        "Turn on dark mode",
        "Screen: Settings > Display; elements: Brightness slider [500,260], Dark mode (On) [880,500]",
        finish("Dark mode is on."),
    ),
    (
        "在淘宝上搜索蓝牙耳机",
        "Screen: 淘宝 搜索结果 蓝牙耳机; elements: 筛选 [900,200], 小米蓝牙耳机 ¥99 [300,400], 华为FreeBuds ¥399 [700,400]",
        finish("已在淘宝搜索蓝牙耳机，结果已显示。"),
    ),
    (
        "Start a 10 minute timer",
        "Screen: Clock > Timer, running 09:58; elements: Cancel [250,850], Pause [500,850]",
        finish("A 10-minute timer is running."),
    ),
    (
        "把手机调成静音",
        "Screen: 快捷开关面板; elements: 静音 (开) [610,250], 手电筒 [850,250]",
        finish("手机已调为静音。"),
    ),
]

PHONE_HELDOUT = [
    (
        "打开支付宝扫一扫",
        "Screen: home screen; apps visible: 微信 [120,340], 支付宝 [360,340], 淘宝 [600,340]",
        launch("支付宝"),
    ),
    (
        "打开支付宝扫一扫",
        "Screen: 支付宝 首页; elements: 扫一扫 [120,220], 收付款 [380,220], 出行 [640,220]",
        tap(120, 220),
    ),
    (
        "Turn off Bluetooth",
        "Screen: Settings > Bluetooth; elements: Bluetooth toggle (On) [880,200], Paired: AirPods [300,330]",
        tap(880, 200),
    ),
    ("Turn on airplane mode", "", launch("Settings")),
    (
        "Turn on airplane mode",
        "Screen: Settings main page; elements: Airplane mode (Off) [880,160], Wi-Fi [300,270], Bluetooth [300,380]",
        tap(880, 160),
    ),
    (
        "给王芳发微信说生日快乐",
        "Screen: 微信 与王芳的聊天; elements: 输入框 (focused, keyboard open) [450,930], 发送 [900,930]",
        type_("生日快乐"),
    ),
    (
        "Search Taobao for a phone case",
        "Screen: Taobao search; elements: Search box (focused, keyboard open) [450,120], Cancel [920,120]",
        type_("phone case"),
    ),
    ("在美团搜索附近的火锅店", "", launch("美团")),
    (
        "在美团搜索附近的火锅店",
        "Screen: 美团 首页; elements: 搜索框 [450,110], 外卖 [130,300], 美食 [380,300]",
        tap(450, 110),
    ),
    (
        "Record a video",
        "Screen: Camera, photo mode; elements: Photo [500,780], Video [650,780], Shutter [500,880]",
        tap(650, 780),
    ),
    (
        "Pin the chat with Wang Fang to the top",
        "Screen: WeChat chat list; elements: Search [880,80], Zhang San [300,260], Wang Fang [300,380]",
        long_press(300, 380),
    ),
    (
        "用高德地图查一下去首都机场的公交路线",
        "Screen: 高德地图 首页; elements: 搜索框 [500,90], 打车 [150,250], 公交地铁 [400,250]",
        tap(500, 90),
    ),
    (
        "Find the Battery page in Settings",
        "Screen: Settings main page; elements: Airplane mode [300,160], Wi-Fi [300,270], Bluetooth [300,380]; list continues below",
        SWIPE_UP,
    ),
    (
        "查看上一张照片",
        "Screen: 相册 照片查看, 第5张/共20张; elements: 分享 [150,930], 删除 [850,930]",
        swipe(150, 500, 850, 500),
    ),
    (
        "Set a 7:15 alarm",
        "Screen: Clock new alarm; elements: Cancel [120,80], Save [880,80], Time 07:15 [500,300]",
        tap(880, 80),
    ),
    ("Open Chrome and search for today's news", "Screen: Chrome, page loading (40%)", wait()),
    (
        "关掉深色模式",
        "Screen: 设置 > 显示和亮度; elements: 亮度滑块 [500,260], 深色模式 (关) [880,500]",
        finish("深色模式已关闭。"),
    ),
    (
        "Call Mom",
        "Screen: Phone, in call with Mom 00:05; elements: Mute [250,700], End call [500,880]",
        finish("The call to Mom is connected."),
    ),
    ("回到主屏幕", "Screen: 支付宝 首页; elements: 扫一扫 [120,220]", HOME),
    (
        "Reply OK to Dad in Messages",
        "Screen: Messages chat with Mom (wrong contact); elements: Back arrow [60,80], Text message field [450,930]",
        BACK,
    ),
    (
        "Send a red packet to Li Si on WeChat",
        "Screen: WeChat chat with Li Si, more panel open; elements: Album [130,700], Camera [370,700], Transfer [610,700], Red Packet [850,700]",
        tap(850, 700),
    ),
    (
        "清空淘宝购物车",
        "Screen: 淘宝 购物车; elements: 管理 [880,120], 蓝牙耳机 [400,350], 结算 [850,940]",
        tap(880, 120),
    ),
    (
        "Copy the verification code from the latest SMS",
        "Screen: Messages chat with 10690; elements: Message (Your code is 482913) [450,500], Text message field [450,930]",
        long_press(450, 500),
    ),
]


def phone_row(instruction, screen, action):
    return {"instruction": instruction, "input": screen, "output": action}


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------
def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_all():
    write_jsonl(HERE / "identity/train.jsonl", [identity_row(*r) for r in IDENTITY_TRAIN])
    write_jsonl(HERE / "identity/heldout.jsonl", [identity_row(*r) for r in IDENTITY_HELDOUT])
    (HERE / "identity/heldout_prompts.txt").write_text("\n".join(DEMO_PROMPTS) + "\n", encoding="utf-8")
    write_jsonl(HERE / "phone_actions/train.jsonl", [phone_row(*r) for r in PHONE_TRAIN])
    write_jsonl(HERE / "phone_actions/heldout.jsonl", [phone_row(*r) for r in PHONE_HELDOUT])


# --------------------------------------------------------------------------------------
# Checking (reads the files on disk, not the lists above)
# --------------------------------------------------------------------------------------
ACTION_PATTERNS = [
    r'do\(action="Launch", app="[^"]+"\)',
    r'do\(action="(?:Tap|Long Press)", element=\[\d{1,3},\d{1,3}\]\)',
    r'do\(action="Type", text="[^"]+"\)',
    r'do\(action="Swipe", start=\[\d{1,3},\d{1,3}\], end=\[\d{1,3},\d{1,3}\]\)',
    r'do\(action="(?:Back|Home)"\)',
    r'do\(action="Wait", duration="\d+ seconds?"\)',
    r'finish\(message="[^"]+"\)',
]
COORD = re.compile(r"\[(\d+),(\d+)\]")
HAS_CJK = re.compile(r"[\u4e00-\u9fff]")


def norm(text):
    return re.sub(r"[\s\W_]+", " ", text.lower()).strip()


def read_jsonl(path, errors):
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            errors.append(f"{path.name}:{n}: not JSON ({e})")
    return rows


def check_identity(name, rows, errors):
    prompts, en, zh = [], 0, 0
    for n, row in enumerate(rows, 1):
        where = f"identity/{name}:{n}"
        msgs = row.get("messages") if isinstance(row, dict) else None
        if set(row) != {"messages"} or not isinstance(msgs, list) or not msgs:
            errors.append(f"{where}: expected exactly one key 'messages' with a non-empty list")
            continue
        if any(set(m) != {"role", "content"} or not isinstance(m["content"], str) or not m["content"] for m in msgs):
            errors.append(f"{where}: every message needs non-empty 'role' and 'content' only")
            continue
        roles = [m["role"] for m in msgs]
        turns = roles[1:] if roles[0] == "system" else roles
        if "system" in turns or len(turns) % 2 or turns != ["user", "assistant"] * (len(turns) // 2):
            errors.append(f"{where}: roles {roles} must be [system] then user/assistant pairs")
            continue
        prompt, answer = msgs[-2]["content"], msgs[-1]["content"]
        prompts.append(prompt)
        if answer.startswith(EN_PREFIX):
            en += 1
        elif answer.startswith(ZH_PREFIX):
            zh += 1
        else:
            errors.append(f"{where}: answer does not start with the identity sentence: {answer!r}")
        # "short": at most 50 English words; Chinese answers at most 110 characters
        if len(answer.split()) > 50 or (HAS_CJK.search(answer) and len(answer) > 110):
            errors.append(f"{where}: answer too long: {answer!r}")
    return prompts, en, zh


def check_phone(name, rows, errors):
    instructions = []
    for n, row in enumerate(rows, 1):
        where = f"phone_actions/{name}:{n}"
        if set(row) != {"instruction", "input", "output"} or not all(isinstance(v, str) for v in row.values()):
            errors.append(f"{where}: needs exactly string keys instruction/input/output")
            continue
        instructions.append(row["instruction"])
        out, screen = row["output"], row["input"]
        if not row["instruction"].strip():
            errors.append(f"{where}: empty instruction")
        if not any(re.fullmatch(p, out) for p in ACTION_PATTERNS):
            errors.append(f"{where}: output is not one known action: {out!r}")
        for x, y in COORD.findall(screen) + COORD.findall(out):
            if not (0 <= int(x) <= 999 and 0 <= int(y) <= 999):
                errors.append(f"{where}: coordinate [{x},{y}] outside 0-999")
        if re.match(r'do\(action="(Tap|Long Press)"', out):
            point = COORD.search(out).group(0)
            if point not in screen:
                errors.append(f"{where}: {point} in output is not in the input")
    return instructions


def check_deepspeed(errors):
    path = HERE / "deepspeed/seed000_ds_config.json"
    text = path.read_text(encoding="utf-8")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        errors.append(f"{path.name}: not JSON ({e})")
        return
    if cfg.get("optimizer", {}).get("params", {}).get("fp16_optimizer_state") is not True:
        errors.append(f"{path.name}: optimizer.params.fp16_optimizer_state should be true (as in the seed)")
    if cfg.get("fp16", {}).get("loss_scale") != 128:
        errors.append(f"{path.name}: fp16.loss_scale should be 128 (as in the seed)")
    if SEED_000.exists():  # token-for-token comparison with the snippet in the seed document
        seed = SEED_000.read_text(encoding="utf-8")
        start = seed.find('{ "train_batch_size"')
        end_marker = '"gradient_clipping": 1.0 }'
        end = seed.find(end_marker, start)
        if start < 0 or end < 0:
            errors.append("seed 000: DeepSpeed snippet not found")
        elif re.sub(r"\s+", "", seed[start : end + len(end_marker)]) != re.sub(r"\s+", "", text):
            errors.append(f"{path.name}: differs from the JSON in {SEED_000.name}")


def check_all():
    errors = []
    id_train = read_jsonl(HERE / "identity/train.jsonl", errors)
    id_held = read_jsonl(HERE / "identity/heldout.jsonl", errors)
    train_prompts, tr_en, tr_zh = check_identity("train.jsonl", id_train, errors)
    held_prompts, he_en, he_zh = check_identity("heldout.jsonl", id_held, errors)
    train_user = {norm(m["content"]) for r in id_train for m in r.get("messages", []) if m.get("role") == "user"}
    for p in held_prompts:
        if norm(p) in train_user:
            errors.append(f"identity/heldout.jsonl: prompt also in train: {p!r}")
    if len(held_prompts) != len({norm(p) for p in held_prompts}):
        errors.append("identity/heldout.jsonl: duplicate prompts")

    demo = [
        line
        for line in (HERE / "identity/heldout_prompts.txt").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    demo_zh = sum(bool(HAS_CJK.search(p)) for p in demo)
    if len(demo) != 8 or demo_zh != 3:
        errors.append(f"identity/heldout_prompts.txt: want 8 prompts (5 en, 3 zh), got {len(demo)} ({demo_zh} zh)")
    for p in demo:
        if norm(p) in train_user:
            errors.append(f"identity/heldout_prompts.txt: prompt also in train: {p!r}")

    ph_train = read_jsonl(HERE / "phone_actions/train.jsonl", errors)
    ph_held = read_jsonl(HERE / "phone_actions/heldout.jsonl", errors)
    train_instr = {norm(i) for i in check_phone("train.jsonl", ph_train, errors)}
    for i in check_phone("heldout.jsonl", ph_held, errors):
        if norm(i) in train_instr:
            errors.append(f"phone_actions/heldout.jsonl: task also in train: {i!r}")

    check_deepspeed(errors)

    for label, count, minimum in [
        ("identity/train", len(id_train), 60),
        ("identity/heldout", len(id_held), 12),
        ("phone_actions/train", len(ph_train), 100),
        ("phone_actions/heldout", len(ph_held), 20),
    ]:
        if count < minimum:
            errors.append(f"{label}: {count} rows, need at least {minimum}")

    actions = {}
    for r in ph_train + ph_held:
        key = r.get("output", "").split('"')[1] if r.get("output", "").startswith("do(") else "finish"
        actions[key] = actions.get(key, 0) + 1
    print(f"identity/train.jsonl        {len(id_train):4d} rows ({tr_en} en, {tr_zh} zh)")
    print(f"identity/heldout.jsonl      {len(id_held):4d} rows ({he_en} en, {he_zh} zh)")
    print(f"identity/heldout_prompts.txt {len(demo):3d} prompts ({len(demo) - demo_zh} en, {demo_zh} zh)")
    print(f"phone_actions/train.jsonl   {len(ph_train):4d} rows")
    print(f"phone_actions/heldout.jsonl {len(ph_held):4d} rows")
    print("actions (train+heldout):", ", ".join(f"{k} {v}" for k, v in sorted(actions.items())))
    for e in errors:
        print("ERROR:", e)
    print("OK" if not errors else f"{len(errors)} error(s)")
    return not errors


if __name__ == "__main__":
    if "--check" not in sys.argv[1:]:
        write_all()
    sys.exit(0 if check_all() else 1)
