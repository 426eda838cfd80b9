"""Realistic gpt-4o requests and four ways to count them, side by side: ctxbudget, the
OpenAI cookbook's published formula (implemented here from the cookbook's code, with
tiktoken), LiteLLM's ``token_counter`` and LangChain's
``ChatOpenAI.get_num_tokens_from_messages``. Used by tests/test_request_counts.py
(the goals, asserted) and benches/request_counts.py (the table in benches/README.md).

The cookbook ("How to count tokens with tiktoken", OpenAI cookbook) counts 3 tokens per
message, every value of the message as text, +1 per ``name``, +3 per request, and
function tools by its measured constants for gpt-4o (7 per function, 3 for the
properties, 3 per property, -3 per enum and 3 per enum item, 12 at the end). Its code
encodes every message value as text, which a ``tool_calls`` list is not: here each
call contributes its function's name and arguments (the text the model reads, as
LiteLLM reads it). Images are not in the cookbook: their reference is OpenAI's
documented rule (low detail 85; high: fit into 2048×2048, shortest side 768, 85 + 170
per 512-pixel tile), computed here independently of ctxbudget.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MODEL = "gpt-4o"

# LiteLLM would fetch its model price map from the network when imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@dataclass(frozen=True)
class Case:
    """One request: what is sent, and which goal it is measured against."""

    name: str
    category: str  # "chat", "tools", "tool calls" or "images"
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    images: list[tuple[int, int, str]] = field(default_factory=list)  # (w, h, detail)


# ----- images -------------------------------------------------------------------------


def png(width: int, height: int) -> bytes:
    """A valid grey PNG of ``width`` × ``height`` pixels (compresses to a few KiB)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + b"\x80" * width
    raw = zlib.compress(row * height, 9)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def data_url(width: int, height: int) -> str:
    return "data:image/png;base64," + base64.b64encode(png(width, height)).decode()


def documented_image_tokens(width: int, height: int, detail: str) -> int:
    """OpenAI's vision guide, step by step (``auto`` counted as ``high``)."""
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        f = 2048 / max(w, h)
        w, h = int(w * f), int(h * f)
    if min(w, h) > 768:
        f = 768 / min(w, h)
        w, h = int(w * f), int(h * f)
    tiles = -(-int(w) // 512) * -(-int(h) // 512)
    return 85 + 170 * tiles


# ----- the corpus ---------------------------------------------------------------------

SYSTEM = "You are a helpful assistant. Answer briefly and cite the files you used."

CHATS = {
    "english": [
        "Can you explain the difference between a process and a thread?",
        "A process has its own address space; threads share their process's memory.",
        "So which one should I use for a CPU-bound Python job?",
    ],
    "german": [
        "Wie verlängere ich meinen Reisepass, wenn ich im Ausland wohne?",
        "Sie wenden sich an die zuständige Auslandsvertretung; bringen Sie Fotos mit.",
        "Brauche ich dafür einen Termin, und wie lange dauert das ungefähr?",
    ],
    "chinese": [
        "请帮我把这段话翻译成英文：今天的会议改到下午三点。",
        "The meeting today has been moved to 3 p.m.",
        "再把它改得更正式一点，用于发给客户的邮件。",
    ],
    "japanese": [
        "東京から京都まで新幹線で何分かかりますか？",
        "のぞみで約2時間15分です。",
        "指定席は事前に予約したほうがいいですか？",
    ],
    "russian": [
        "Объясни, пожалуйста, что такое замыкание в JavaScript.",
        "Это функция вместе с лексическим окружением, в котором она была создана.",
        "Приведи короткий пример со счётчиком.",
    ],
    "arabic": [
        "ما هي أفضل طريقة لتعلم البرمجة للمبتدئين؟",
        "ابدأ بلغة بسيطة مثل بايثون، وطبّق ما تتعلمه في مشاريع صغيرة.",
        "هل تنصحني بدورة معينة على الإنترنت؟",
    ],
    "hindi": [
        "मुझे दिल्ली में तीन दिन की यात्रा की योजना बनानी है।",
        "पहले दिन पुरानी दिल्ली, दूसरे दिन कुतुब मीनार, तीसरे दिन संग्रहालय देखें।",
        "क्या सर्दियों में जाना ठीक रहेगा?",
    ],
    "emoji and code": [
        "My CI fails 😭 with `ModuleNotFoundError: No module named 'yaml'` — why?",
        "Your job installs requirements before PyYAML is listed; add `pyyaml` there.",
        "Thanks!! 🎉 Should I pin it like `pyyaml==6.0.2`?",
    ],
}


def _chat(turns: list[str], *, name: str | None = None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for i, text in enumerate(turns):
        message: dict[str, Any] = {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        if name and i % 2 == 0:
            message["name"] = name
        messages.append(message)
    return messages


TOOL_SPECS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "read_file",
        "Read a text file from the repository.",
        {"path": "Path relative to the repo root."},
    ),
    (
        "write_file",
        "Write a text file, replacing its contents.",
        {"path": "Path to write.", "content": "The new contents."},
    ),
    ("list_dir", "List the entries of a directory.", {"path": "Directory to list."}),
    (
        "search_code",
        "Search the code base for a regular expression.",
        {"pattern": "A regular expression.", "glob": "Only files matching this glob."},
    ),
    (
        "run_tests",
        "Run the test suite or a subset of it.",
        {"selector": "A pytest node id or keyword expression."},
    ),
    ("git_diff", "Show the working tree's changes.", {"path": "Limit the diff to this path."}),
    ("git_commit", "Commit the staged changes.", {"message": "The commit message."}),
    (
        "get_weather",
        "Get the current weather for a city.",
        {
            "city": "City name, e.g. Paris.",
            "unit": ("Temperature unit.", ["celsius", "fahrenheit"]),
        },
    ),
    (
        "send_email",
        "Send an email to one recipient.",
        {"to": "Recipient address.", "subject": "Subject line.", "body": "Plain-text body."},
    ),
    (
        "create_ticket",
        "Open a ticket in the issue tracker.",
        {
            "title": "Short title.",
            "priority": ("How urgent it is.", ["low", "medium", "high"]),
            "body": "What happened.",
        },
    ),
    (
        "query_sql",
        "Run a read-only SQL query against the analytics database.",
        {"sql": "The query."},
    ),
    ("fetch_url", "Fetch a web page and return its text.", {"url": "The page's URL."}),
    (
        "translate",
        "Translate text into another language.",
        {"text": "Text to translate.", "target": "Target language code."},
    ),
    (
        "calendar_add",
        "Add an event to the user's calendar.",
        {
            "title": "Event title.",
            "start": "ISO 8601 start time.",
            "minutes": ("Duration in minutes.", None),
        },
    ),
    ("lookup_order", "Look up an order by its number.", {"order_id": "The order number."}),
    (
        "refund_order",
        "Refund an order, fully or in part.",
        {"order_id": "The order number.", "amount": ("Amount to refund.", None)},
    ),
    (
        "convert_currency",
        "Convert an amount between currencies.",
        {"amount": ("The amount.", None), "from": "Currency code.", "to": "Currency code."},
    ),
    (
        "summarize",
        "Summarize a long text.",
        {"text": "The text.", "style": ("Summary style.", ["bullets", "paragraph"])},
    ),
    (
        "kubectl_logs",
        "Fetch the logs of a Kubernetes pod.",
        {"pod": "Pod name.", "namespace": "Namespace.", "tail": ("Lines from the end.", None)},
    ),
    (
        "notify_slack",
        "Post a message to a Slack channel.",
        {"channel": "Channel name.", "text": "Message text."},
    ),
]


def tool(index: int) -> dict[str, Any]:
    """A realistic function tool in OpenAI Chat's shape (flat schema, every property
    typed and described, as the cookbook's formula needs)."""
    name, description, props = TOOL_SPECS[index]
    properties: dict[str, Any] = {}
    for key, spec in props.items():
        if isinstance(spec, tuple):
            desc, enum = spec
            properties[key] = (
                {"type": "string", "description": desc, "enum": enum}
                if enum
                else {"type": "number", "description": desc}
            )
        else:
            properties[key] = {"type": "string", "description": spec}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(props)[:1]},
        },
    }


CODE_OUTPUT = '''import json
from pathlib import Path


def load_config(path: Path) -> dict:
    """Read the service configuration, falling back to defaults."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"retries": 3, "timeout": 30.0, "endpoints": []}


def charge(client, order, *, retries=3):
    for attempt in range(retries):
        response = client.post("/charges", json={"order": order.id, "cents": order.total})
        if response.status_code == 503:
            continue
        response.raise_for_status()
        return response.json()
    raise RuntimeError(f"charge failed after {retries} attempts")
'''

LOG_OUTPUT = "\n".join(
    f"2026-11-{d:02d}T0{h}:1{h}:0{d % 10}Z {lvl} payments-api[{1200 + d}]: {msg}"
    for d, h, lvl, msg in [
        (3, 1, "INFO", "GET /health 200 1.2ms"),
        (3, 2, "WARN", "POST /charges 503 upstream timeout after 30000ms (attempt 1/3)"),
        (3, 2, "WARN", "POST /charges 503 upstream timeout after 30000ms (attempt 2/3)"),
        (3, 3, "ERROR", "POST /charges failed: RuntimeError('charge failed after 3 attempts')"),
        (4, 1, "INFO", "deploy v2.14.1 rolled out to 6/6 pods"),
        (4, 5, "ERROR", "db pool exhausted (max=20, waiting=57); request id 9f3c2e1a"),
        (5, 7, "INFO", "GET /charges?limit=50 200 48.0ms"),
    ]
)


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _rounds(n: int, output: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "Why do charges fail since yesterday? Check the code and logs.",
        },
    ]
    steps: list[tuple[str, dict[str, Any], str]] = [
        ("read_file", {"path": "payments/charge.py"}, CODE_OUTPUT),
        (
            "kubectl_logs",
            {"pod": "payments-api-7c9d", "namespace": "prod", "tail": 200},
            LOG_OUTPUT,
        ),
        (
            "search_code",
            {"pattern": "retries\\s*=", "glob": "*.py"},
            "payments/charge.py:13: def charge(client, order, *, retries=3):",
        ),
        (
            "run_tests",
            {"selector": "tests/test_charge.py -k retry"},
            "3 passed, 1 failed: test_charge_retries_on_503 (AssertionError: 2 != 3)",
        ),
    ]
    for i in range(n):
        name, args, result = steps[i % len(steps)]
        if i == 0:
            result = output
        call = _call(f"call_{i:02d}aB3xQ9", name, args)
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return messages


def _image_request(sizes: list[tuple[int, int, str]], text: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for w, h, detail in sizes:
        parts.append({"type": "image_url", "image_url": {"url": data_url(w, h), "detail": detail}})
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": parts}]


def corpus() -> list[Case]:
    cases = [Case(f"chat: {lang}", "chat", _chat(turns)) for lang, turns in CHATS.items()]
    cases.append(Case("chat: with names", "chat", _chat(CHATS["english"], name="maria_k")))
    long_turns = [t for turns in CHATS.values() for t in turns]
    cases.append(Case("chat: 24 turns, 8 scripts", "chat", _chat(long_turns)))
    cases.append(Case("chat: one word", "chat", [{"role": "user", "content": "hi"}]))
    question = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Tidy up the repo."},
    ]
    for n in (1, 2, 3, 5, 8, 12, 16, 20):
        cases.append(Case(f"tools: {n} schemas", "tools", question, [tool(i) for i in range(n)]))
    five = [tool(i) for i in (0, 2, 3, 4, 18)]
    for n, output, label in [
        (1, CODE_OUTPUT, "code"),
        (2, LOG_OUTPUT, "logs"),
        (3, CODE_OUTPUT, "code"),
        (4, LOG_OUTPUT, "logs"),
        (6, CODE_OUTPUT, "code"),
        (8, LOG_OUTPUT, "logs"),
    ]:
        cases.append(
            Case(f"tool calls: {n} rounds, {label}", "tool calls", _rounds(n, output), five)
        )
    for sizes in [
        [(512, 512, "low")],
        [(512, 512, "high")],
        [(1024, 1024, "high")],
        [(1920, 1080, "auto")],
        [(800, 4000, "high")],
        [(4096, 4096, "high")],
        [(300, 200, "high"), (2048, 1536, "low")],
        [(1280, 720, "high"), (640, 480, "auto"), (100, 3000, "high")],
    ]:
        label = ", ".join(f"{w}×{h} {d}" for w, h, d in sizes)
        cases.append(
            Case(
                f"images: {label}",
                "images",
                _image_request(sizes, "What is in these?"),
                images=sizes,
            )
        )
    return cases


# ----- the counters -------------------------------------------------------------------


def cookbook(case: Case) -> int:
    """The OpenAI cookbook's formula for gpt-4o (``num_tokens_from_messages`` and
    ``num_tokens_for_tools``), with tiktoken; images by the documented rule."""
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    total = 3  # every reply is primed with <|start|>assistant<|message|>
    for message in case.messages:
        total += 3
        for key, value in message.items():
            if key == "tool_calls":
                for call in value:
                    total += len(enc.encode(call["function"]["name"]))
                    total += len(enc.encode(call["function"]["arguments"]))
            elif isinstance(value, list):  # content parts: text parts as text
                total += sum(len(enc.encode(p["text"])) for p in value if p["type"] == "text")
            elif isinstance(value, str):
                total += len(enc.encode(value))
            if key == "name":
                total += 1
    total += sum(documented_image_tokens(w, h, d) for w, h, d in case.images)
    if case.tools:
        func_init, prop_init, prop_key, enum_init, enum_item, func_end = 7, 3, 3, -3, 3, 12
        for t in case.tools:
            function = t["function"]
            total += func_init
            desc = function.get("description", "").removesuffix(".")
            total += len(enc.encode(function["name"] + ":" + desc))
            properties = (function.get("parameters") or {}).get("properties", {})
            if properties:
                total += prop_init
                for key, prop in properties.items():
                    total += prop_key
                    if "enum" in prop:
                        total += enum_init
                        for item in prop["enum"]:
                            # (the cookbook's code encodes str items; a null item adds
                            # only its constant)
                            total += enum_item + (
                                len(enc.encode(item)) if isinstance(item, str) else 0
                            )
                    # A missing description is empty; a list of types is written as the
                    # cookbook's f-string writes it.
                    p_desc = prop.get("description", "").removesuffix(".")
                    total += len(enc.encode(f"{key}:{prop.get('type', '')}:{p_desc}"))
        total += func_end
    return total


def ctxbudget_count(case: Case) -> int:
    import ctxbudget

    return ctxbudget.count_messages(case.messages, case.tools or None, model=MODEL)


def litellm_count(case: Case) -> int:
    import litellm

    tools: Any = case.tools or None
    return int(litellm.token_counter(model=MODEL, messages=case.messages, tools=tools))


def langchain_count(case: Case) -> int:
    from langchain_core.messages import convert_to_messages
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=MODEL, api_key="unused")  # type: ignore[arg-type]
    messages = convert_to_messages(case.messages)
    return int(llm.get_num_tokens_from_messages(messages, tools=case.tools or None))


COUNTERS: dict[str, Callable[[Case], int]] = {
    "ctxbudget": ctxbudget_count,
    "cookbook": cookbook,
    "LiteLLM": litellm_count,
    "LangChain": langchain_count,
}


def counts(case: Case) -> dict[str, int | str]:
    """Each counter's count of ``case`` (a short reason where a counter fails)."""
    out: dict[str, int | str] = {}
    for name, counter in COUNTERS.items():
        try:
            out[name] = counter(case)
        except Exception as e:  # a third-party counter that cannot count a shape
            out[name] = f"fails: {type(e).__name__}"
    return out
