"""Provider formats, validated against the providers' own typed definitions (no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pydantic = pytest.importorskip("pydantic")
openai_chat = pytest.importorskip("openai.types.chat")
openai_responses = pytest.importorskip("openai.types.responses")
anthropic_types = pytest.importorskip("anthropic.types")

from ctxbudget import Session  # noqa: E402

TypeAdapter = pydantic.TypeAdapter


def _session_with_a_tool_step(tmp_path: Path) -> Session:
    s = Session.open(
        tmp_path / "ws",
        model="gpt-4o",
        context_window=64_000,
        durability="none",
        system="You are an auditor.",
    )
    s.add_user("Find the deploy key note.")
    s.prepare()
    s.add_assistant(
        "Searching.",
        [
            {
                "id": "call_1",
                "name": "session_history",
                "arguments": {"action": "search", "query": "deploy"},
            }
        ],
    )
    s.add_tool_results(
        [
            {
                "call_id": "call_1",
                "name": "session_history",
                "output": s.run_tool("session_history", {"action": "search", "query": "deploy"}),
            }
        ]
    )
    return s


def _validate(adapter_type: Any, values: list[Any]) -> None:
    adapter = TypeAdapter(adapter_type)
    blocks = TypeAdapter(anthropic_types.ContentBlockParam)
    for v in values:
        adapter.validate_python(v, strict=False)
        # Lists inside TypedDicts are validated lazily; check content blocks one by one.
        if adapter_type is anthropic_types.MessageParam and isinstance(v["content"], list):
            for block in v["content"]:
                blocks.validate_python(block, strict=False)


def test_validation_catches_a_malformed_block() -> None:
    with pytest.raises(pydantic.ValidationError):
        _validate(
            anthropic_types.MessageParam, [{"role": "user", "content": [{"type": "tool_result"}]}]
        )
    with pytest.raises(pydantic.ValidationError):
        _validate(openai_chat.ChatCompletionMessageParam, [{"role": "tool", "content": "x"}])


def test_openai_chat_request_shapes(tmp_path: Path) -> None:
    turn = _session_with_a_tool_step(tmp_path).prepare()
    req = turn.to_openai_chat()
    assert req["messages"][0] == {"role": "system", "content": turn.system}
    _validate(openai_chat.ChatCompletionMessageParam, req["messages"])
    _validate(openai_chat.ChatCompletionFunctionToolParam, req["tools"])
    roles = [m["role"] for m in req["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert req["messages"][1]["content"].endswith("[id: 1]")
    for tool in req["tools"]:
        params = tool["function"]["parameters"]
        assert set(params["required"]) == set(params["properties"]), "strict: all required"
        assert tool["function"]["strict"] is True


def test_openai_responses_request_shapes(tmp_path: Path) -> None:
    req = _session_with_a_tool_step(tmp_path).prepare().to_openai_responses()
    _validate(openai_responses.ResponseInputItemParam, req["input"])
    _validate(openai_responses.FunctionToolParam, req["tools"])
    kinds = [i.get("type", i.get("role")) for i in req["input"]]
    assert kinds == ["user", "assistant", "function_call", "function_call_output"]


def test_anthropic_request_shapes(tmp_path: Path) -> None:
    req = _session_with_a_tool_step(tmp_path).prepare().to_anthropic()
    _validate(anthropic_types.MessageParam, req["messages"])
    _validate(anthropic_types.ToolParam, req["tools"])
    assert [m["role"] for m in req["messages"]] == ["user", "assistant", "user"]
    assert req["messages"][1]["content"][1]["type"] == "tool_use"
    assert req["messages"][2]["content"][0]["type"] == "tool_result"
    assert isinstance(req["system"], str)


def test_replies_round_trip_from_sdk_objects(tmp_path: Path) -> None:
    s = Session.open(tmp_path / "ws", model="gpt-4o", context_window=64_000, durability="none")
    s.add_user("hi")
    s.prepare()
    reply = openai_chat.ChatCompletionMessage(
        role="assistant",
        content="Let me look.",
        tool_calls=[
            openai_chat.ChatCompletionMessageFunctionToolCall(
                id="call_9",
                type="function",
                function={
                    "name": "memory",
                    "arguments": '{"command": "view", "path": "/memories"}',
                },
            )
        ],
    )
    s.add_assistant_from_openai(reply)
    s.add_tool_results(
        [
            {
                "call_id": "call_9",
                "name": "memory",
                "output": s.run_tool("memory", {"command": "view", "path": "/memories"}),
            }
        ]
    )
    message = anthropic_types.Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-x",
        content=[
            anthropic_types.TextBlock(type="text", text="Done."),
            anthropic_types.ToolUseBlock(type="tool_use", id="tu_1", name="new_context", input={}),
        ],
        stop_reason="tool_use",
        stop_sequence=None,
        usage=anthropic_types.Usage(input_tokens=1, output_tokens=1),
    )
    s.add_assistant_from_anthropic(message)
    rows = list(s.history.rows())
    calls = [p for r in rows for p in r.parts if p["type"] == "tool_call"]
    assert calls == [
        {
            "type": "tool_call",
            "id": "call_9",
            "name": "memory",
            "arguments": {"command": "view", "path": "/memories"},
        },
        {"type": "tool_call", "id": "tu_1", "name": "new_context", "arguments": {}},
    ]
    texts = [p["text"] for r in rows for p in r.parts if p["type"] == "text"]
    assert "Let me look." in texts and "Done." in texts
    # And back out again, still valid for both providers.
    turn = s.prepare()
    _validate(openai_chat.ChatCompletionMessageParam, turn.to_openai_chat()["messages"])
    _validate(anthropic_types.MessageParam, turn.to_anthropic()["messages"])
