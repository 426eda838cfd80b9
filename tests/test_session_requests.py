"""What a Session sends is what it counts: host tools, hook-added tools, tool outputs as
the host gave them, any model with an explicit encoding, the standalone
count_messages(), and tool calls left open by a process that stopped mid-step."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import (
    MESSAGE_TOKENS,
    Encoding,
    History,
    InvalidArgumentError,
    Session,
    UnknownModelError,
    count_messages,
)
from ctxbudget.session import INTERRUPTED_OUTPUT
from ctxbudget.tokens import FUNCTION_TOKENS, FUNCTIONS_TOKENS

PARAMS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Repository-relative path of the file."},
        "start": {"type": "integer", "description": "First line to return (1-based)."},
        "end": {"type": "integer", "description": "Last line to return (inclusive)."},
    },
    "required": ["path"],
}
HOST_TOOL = {
    "name": "read_file",
    "description": "Read part of a file of the repository under review. " * 20,
    "parameters": PARAMS,
}


def _open(ws: Path, **kw: Any) -> Session:
    kw.setdefault("context_window", 64_000)
    kw.setdefault("model", "gpt-4o")
    return Session.open(ws, durability="none", **kw)


def _sent(s: Session, turn: Any) -> int:
    """Tokens of exactly what the turn sends."""
    return s.count_request(turn.system, turn.messages, turn.tools)


def test_host_tools_are_advertised_and_counted(tmp_path: Path) -> None:
    plain, hosted = _open(tmp_path / "a"), _open(tmp_path / "b", tools=[HOST_TOOL])
    for s in (plain, hosted):
        s.add_user("Audit the billing code.")
    before, after = plain.prepare(), hosted.prepare()
    assert after.tools[0]["name"] == "read_file"
    assert [t["name"] for t in after.tools][1:] == [t["name"] for t in before.tools]
    # The host's function joins ctxbudget's in the one TypeScript namespace of the request.
    added = after.decision.projected - before.decision.projected
    assert added > 100
    assert added == count_messages([], [HOST_TOOL, *before.tools], model="gpt-4o") - (
        count_messages([], before.tools, model="gpt-4o")
    )
    assert after.decision.projected == _sent(hosted, after)


def test_tools_added_by_an_unrestricted_hook_are_counted(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    s.add_user("Audit the billing code.")
    without = s.prepare()
    s.register_hook(lambda req: {**req, "tools": [*req["tools"], HOST_TOOL]}, context_only=False)
    with_hook = s.prepare()
    assert HOST_TOOL in with_hook.tools
    assert with_hook.decision.projected == _sent(s, with_hook)
    assert with_hook.decision.projected > without.decision.projected + 100


def test_hooks_get_copies(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    s.add_user("Audit the billing code.")
    clean = copy.deepcopy(s.prepare().messages)

    def vandal(req: dict[str, Any]) -> dict[str, Any]:
        for m in req["messages"]:
            m["content"] = "x"
        return req

    hook = s.register_hook(vandal, context_only=False)
    assert s.prepare().messages[0]["content"] == "x"
    s.unregister_hook(hook)
    assert s.prepare().messages == clean, "the session's caches were not touched"


def test_host_tool_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="'memory'"):
        _open(tmp_path / "a", tools=[{**HOST_TOOL, "name": "memory"}])
    with pytest.raises(InvalidArgumentError, match="'read_file'"):
        _open(tmp_path / "b", tools=[HOST_TOOL, HOST_TOOL])
    with pytest.raises(InvalidArgumentError, match="name"):
        _open(tmp_path / "c", tools=[{"description": "no name"}])


def test_tool_outputs_go_out_as_the_host_gave_them(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    s.add_user("Translate the greetings.")
    structured = {"greetings": ["Grüße", "こんにちは", "Привет", "🙂"] * 300}
    text = "naïve café — 日本語のテキスト\n" * 200
    s.add_assistant(
        None,
        [
            {"id": "c1", "name": "fetch", "arguments": {"q": "Grüße"}},
            {"id": "c2", "name": "fetch", "arguments": {"q": "日本"}},
        ],
    )
    s.add_tool_results(
        [
            {"call_id": "c1", "name": "fetch", "output": structured},
            {"call_id": "c2", "name": "fetch", "output": text},
        ]
    )
    turn = s.prepare()
    tool_messages = [m for m in turn.messages if m["role"] == "tool"]
    assert tool_messages[0]["content"] == json.dumps(structured, ensure_ascii=False)
    assert tool_messages[1]["content"] == text, "a string goes out unchanged"
    chat = turn.to_openai_chat()["messages"]
    sent = json.dumps(chat, ensure_ascii=False)
    assert "\\u" not in sent, "no ASCII escaping anywhere in the request"
    size = len(tool_messages[0]["content"].encode())
    assert size < 1.2 * len(json.dumps(structured, ensure_ascii=False).encode())
    assert turn.decision.projected == _sent(s, turn)


def test_any_model_with_an_explicit_encoding(tmp_path: Path) -> None:
    s = _open(tmp_path / "a", model="my-local-llama", context_window=32_000, encoding="o200k_base")
    s.add_user("hello")
    turn = s.prepare()
    assert turn.status == "send" and s.budget.context_window == 32_000
    assert s.encoding.name == "o200k_base"
    enc = Encoding("cl100k_base")
    t = _open(tmp_path / "b", model="my-local-llama", context_window=32_000, encoding=enc)
    assert t.encoding is enc
    with pytest.raises(UnknownModelError, match="encoding"):
        _open(tmp_path / "c", model="my-local-llama", context_window=32_000)
    with pytest.raises(InvalidArgumentError, match="context_window"):
        _open(tmp_path / "d", model="my-local-llama", context_window=None, encoding="o200k_base")


def test_sessions_of_one_process_share_their_encoding_and_its_count_cache(
    tmp_path: Path,
) -> None:
    """The system text and tool schemas every session sends are counted once per
    process; counts stay those of a private encoding."""
    a = _open(tmp_path / "a", tools=[HOST_TOOL])
    b = _open(tmp_path / "b", tools=[HOST_TOOL])
    assert a.encoding is b.encoding
    local = _open(
        tmp_path / "c", model="my-local-llama", context_window=32_000, encoding="o200k_base"
    )
    assert (
        local.encoding
        is _open(
            tmp_path / "d", model="other-llama", context_window=32_000, encoding="o200k_base"
        ).encoding
    )
    private = Encoding("o200k_base", cache_size=0)
    own = _open(tmp_path / "e", tools=[HOST_TOOL], encoding=private)
    for s in (a, b, own):
        s.add_user("Audit the billing code.")
    assert a.prepare().decision.projected == own.prepare().decision.projected
    with pytest.raises(TypeError):
        _open(tmp_path / "f", encoding=["o200k_base"])  # type: ignore[arg-type]


def test_count_messages_matches_what_a_session_budgets(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws", tools=[HOST_TOOL])
    s.add_user("Audit the billing code.")
    s.add_assistant("Reading.", [{"id": "c1", "name": "read_file", "arguments": {"path": "a"}}])
    s.add_tool_results([{"call_id": "c1", "name": "read_file", "output": {"text": "Grüße"}}])
    turn = s.prepare()
    messages = [{"role": "system", "content": turn.system}, *turn.messages]
    assert count_messages(messages, turn.tools, model="gpt-4o") == turn.decision.projected
    assert count_messages(messages, turn.tools, encoding=s.encoding) == turn.decision.projected


def test_count_messages_shapes() -> None:
    enc = Encoding("o200k_base")
    hi = [{"role": "user", "content": "hi"}]
    # The cookbook's rule: 3 per message plus its role's tokens, 3 to prime the reply.
    assert count_messages(hi, encoding="o200k_base") == 3 + 3 + enc.count("user") + enc.count("hi")
    parts = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ],
        }
    ]
    # An image known only by URL counts as its detail level's maximum (auto: 8 tiles).
    assert count_messages(parts, encoding="o200k_base") == (
        3 + MESSAGE_TOKENS + enc.count("user") + enc.count("what is this?") + 85 + 8 * 170
    )
    # A tool call is its function's name and arguments, 3 tokens of framing.
    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1}'}
    assert count_messages([item], encoding="o200k_base") == (
        3 + 3 + enc.count("f") + enc.count('{"a": 1}')
    )
    # A function tool is the TypeScript the model reads, in a section of its own.
    tool = {"type": "function", "function": {"name": "f", "parameters": PARAMS}}
    assert count_messages(hi, [tool], encoding="o200k_base") == (
        count_messages(hi, encoding="o200k_base")
        + FUNCTIONS_TOKENS  # the section's framing, then per function (fitted to the cookbook)
        + FUNCTION_TOKENS
        + enc.count(
            "# Tools\n\n## functions\n\nnamespace functions {\n\n"
            "type f = (_: {\n// Repository-relative path of the file.\npath: string,\n"
            "// First line to return (1-based).\nstart?: number,\n"
            "// Last line to return (inclusive).\nend?: number,\n}) => any;\n\n"
            "} // namespace functions"
        )
    )
    with pytest.raises(ValueError, match="exactly one"):
        count_messages(hi)
    with pytest.raises(ValueError, match="exactly one"):
        count_messages(hi, model="gpt-4o", encoding="o200k_base")
    with pytest.raises(TypeError, match="list"):
        count_messages(hi[0], encoding="o200k_base")  # type: ignore[arg-type]


# ----- a process stopped between add_assistant(tool_calls) and add_tool_results --------


def _stopped_mid_step(ws: Path, **kw: Any) -> None:
    s = _open(ws, **kw)
    s.add_user("Audit the billing code.")
    s.prepare()
    s.add_assistant(
        "Reading two files.",
        [
            {"id": "c1", "name": "read_file", "arguments": {"path": "a.py"}},
            {"id": "c2", "name": "read_file", "arguments": {"path": "b.py"}},
        ],
    )
    # ... and the process dies here: no results are ever recorded.


def test_resumed_session_lists_and_interrupts_open_calls(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _stopped_mid_step(ws)
    s = _open(ws)
    assert [(c.id, c.name, c.arguments) for c in s.open_calls] == [
        ("c1", "read_file", {"path": "a.py"}),
        ("c2", "read_file", {"path": "b.py"}),
    ]
    assert not s.settled
    turn = s.prepare()
    assert turn.status == "send" and s.settled and s.open_calls == []
    assert "interrupted:c1" in turn.events and "interrupted:c2" in turn.events
    results = [m for m in turn.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["c1", "c2"]
    assert json.loads(results[0]["content"]) == INTERRUPTED_OUTPUT
    rows = [r for r in History.open(ws, durability="none").rows() if r.role == "tool"]
    assert all(r.meta == {"interrupted": True} for r in rows) and len(rows) == 2
    # The pair is whole: a late result for it is refused and nothing is written.
    with pytest.raises(InvalidArgumentError, match="already has a result"):
        s.add_tool_results([{"call_id": "c1", "name": "read_file", "output": "late"}])
    assert len([r for r in s.history.rows() if r.role == "tool"]) == 2


def test_open_calls_at_the_usable_limit_do_not_wedge_the_window(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws, context_window=16_000)
    s.add_user("Audit the billing code.")
    n = 0
    while s._projected() < s.budget.usable_limit - 600:
        n += 1
        s.add_assistant(None, [{"id": f"r{n}", "name": "read_file", "arguments": {}}])
        s.add_tool_results([{"call_id": f"r{n}", "name": "read_file", "output": "x " * 400}])
    s.add_assistant("thinking " * 800, [{"id": "last", "name": "read_file", "arguments": {}}])
    # The process stops here: a call open, the window past its usable limit.
    assert s._projected() >= s.budget.usable_limit and not s.settled
    resumed = _open(ws, context_window=16_000)
    turn = resumed.prepare()
    assert turn.status == "send" and turn.window_id != "w:0", turn.reason
    assert "interrupted:last" in turn.events


def test_wait_policy_pauses_until_the_results_arrive(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _stopped_mid_step(ws)
    s = _open(ws, open_calls="wait")
    turn = s.prepare()
    assert turn.status == "pause" and "c1, c2" in (turn.reason or "")
    s.add_tool_results([{"call_id": c, "name": "read_file", "output": "ok"} for c in ("c1", "c2")])
    assert s.prepare().status == "send"
    with pytest.raises(InvalidArgumentError, match="open_calls"):
        _open(tmp_path / "other", open_calls="ignore")


def test_interrupt_open_calls_is_public_and_idempotent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _stopped_mid_step(ws)
    s = _open(ws, open_calls="wait")
    assert [c.id for c in s.interrupt_open_calls()] == ["c1", "c2"]
    assert s.interrupt_open_calls() == []
    assert s.prepare().status == "send"


def test_a_new_user_message_after_a_stopped_step_follows_the_interrupted_results(
    tmp_path: Path,
) -> None:
    """Resumed with calls open, the host records the user's next message before any
    prepare(): the interrupted results go in first, in the same batch, so the provider
    sees call, result, message (a result after the message is an invalid request)."""
    ws = tmp_path / "ws"
    _stopped_mid_step(ws)
    s = _open(ws)
    item = s.add_user("Never mind, summarize what you have.")
    assert s.open_calls == [] and s.settled
    tail = [(r.role, r.kind) for r in s.history.rows()][-3:]
    assert tail == [("tool", "message"), ("tool", "message"), ("user", "message")]
    assert [r.seq for r in s.history.rows()][-1] == int(item)
    turn = s.prepare()
    roles = [m["role"] for m in turn.messages]
    assert roles[-4:] == ["assistant", "tool", "tool", "user"], roles
    # Under open_calls="wait" another worker may still deliver them: nothing is added.
    waiting = tmp_path / "wait"
    _stopped_mid_step(waiting)
    w = _open(waiting, open_calls="wait")
    w.add_user("Still there?")
    assert [c.id for c in w.open_calls] == ["c1", "c2"]


def test_count_messages_counts_anthropic_blocks_as_sent() -> None:
    enc = Encoding("cl100k_base")
    use = {"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {"path": "ä.py"}}
    result = {"type": "tool_result", "tool_use_id": "tu_1", "content": "print('ä')"}
    messages = [
        {"role": "assistant", "content": [{"type": "text", "text": "Reading."}, use]},
        {"role": "user", "content": [result]},
    ]
    # tool_use: a call (its name and its input as JSON); tool_result: its content, framed.
    expected = (
        3
        + 2 * MESSAGE_TOKENS
        + enc.count("assistant")
        + enc.count("user")
        + enc.count("Reading.")
        + 3
        + enc.count("read_file")
        + enc.count(json.dumps(use["input"], ensure_ascii=False, separators=(",", ":")))
        + MESSAGE_TOKENS
        + enc.count("print('ä')")
    )
    assert count_messages(messages, encoding=enc) == expected


def test_calls_made_while_the_session_runs_are_left_to_the_host(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    s.add_user("go")
    s.add_assistant(None, [{"id": "c1", "name": "read_file", "arguments": {}}])
    turn = s.prepare()
    assert not any(e.startswith("interrupted") for e in turn.events)
    assert [c.id for c in s.open_calls] == ["c1"], "only calls left by a stopped process"
