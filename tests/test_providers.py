"""Provider formats, validated against the providers' own typed definitions (no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pydantic = pytest.importorskip("pydantic")
openai_chat = pytest.importorskip("openai.types.chat")
openai_responses = pytest.importorskip("openai.types.responses")
anthropic_types = pytest.importorskip("anthropic.types")

import ctxbudget  # noqa: E402
from ctxbudget import InvalidArgumentError, Session  # noqa: E402

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
    counted = {t["name"]: t["parameters"] for t in turn.tools}
    for tool in req["tools"]:
        # Sent with the schema the session counted: ctxbudget's tools are not strict.
        assert tool["function"]["parameters"] == counted[tool["function"]["name"]]
        assert "strict" not in tool["function"]


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


def _response(output: list[dict[str, Any]]) -> Any:
    return openai_responses.Response.model_validate(
        {
            "id": "resp_1",
            "created_at": 0,
            "model": "o4-mini",
            "object": "response",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look up the note first."}],
    "encrypted_content": "gAAAA-opaque-blob",
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_7",
    "name": "session_history",
    "arguments": '{"action": "search", "query": "Grüße"}',
    "status": "completed",
}
TEXT = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Let me search.", "annotations": []}],
}


def test_responses_reply_round_trips_with_reasoning_and_calls(tmp_path: Path) -> None:
    s = Session.open(tmp_path / "ws", model="o4-mini", context_window=64_000, durability="none")
    s.add_user("Find the greeting note.")
    s.prepare()
    s.add_assistant_from_openai_responses(_response([REASONING, TEXT, CALL]))
    assert [c.id for c in s.open_calls] == ["call_7"]
    s.add_tool_results(
        [
            {
                "call_id": "call_7",
                "name": "session_history",
                "output": s.run_tool("session_history", {"action": "search", "query": "x"}),
            }
        ]
    )
    turn = s.prepare()
    req = turn.to_openai_responses()
    _validate(openai_responses.ResponseInputItemParam, req["input"])
    kinds = [i.get("type", i.get("role")) for i in req["input"]]
    assert kinds == ["user", "reasoning", "assistant", "function_call", "function_call_output"]
    reasoning = req["input"][1]
    TypeAdapter(openai_responses.ResponseReasoningItemParam).validate_python(reasoning)
    assert reasoning["id"] == "rs_1" and reasoning["encrypted_content"] == "gAAAA-opaque-blob"
    assert reasoning["summary"] == REASONING["summary"]
    call = req["input"][3]
    TypeAdapter(openai_responses.ResponseFunctionToolCallParam).validate_python(call)
    assert (call["call_id"], call["name"]) == ("call_7", "session_history")
    assert json.loads(call["arguments"]) == {"action": "search", "query": "Grüße"}
    assert "\\u" not in call["arguments"], "arguments go out with their characters"
    assert req["input"][2]["content"] == "Let me search."
    # The reasoning items are sent, so they are counted.
    assert turn.decision.projected == s.count_request(turn.system, turn.messages, turn.tools)
    without = dict(turn.messages[1])
    without.pop("reasoning")
    assert s.count_request(turn.system, [turn.messages[0], without, *turn.messages[2:]], []) < (
        s.count_request(turn.system, turn.messages, [])
    )


def test_responses_refusal_and_plain_dicts(tmp_path: Path) -> None:
    s = Session.open(tmp_path / "ws", model="gpt-4o", context_window=64_000, durability="none")
    s.add_user("Do something forbidden.")
    refusal = {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    s.add_assistant_from_openai_responses(_response([refusal]))
    row = list(s.history.rows())[-1]
    assert row.parts == [{"type": "text", "text": "I can't help with that."}]
    assert row.meta == {"refusal": True}
    # The output list alone, as plain dicts, works the same.
    s.add_assistant_from_openai_responses([TEXT, CALL])
    assert [c.name for c in s.open_calls] == ["session_history"]


def test_responses_reply_is_not_silently_emptied(tmp_path: Path) -> None:
    s = Session.open(tmp_path / "ws", model="gpt-4o", context_window=64_000, durability="none")
    s.add_user("hi")
    with pytest.raises(InvalidArgumentError, match="add_assistant_from_openai_responses"):
        s.add_assistant_from_openai(_response([CALL]))
    web = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    with pytest.raises(InvalidArgumentError, match="web_search_call"):
        s.add_assistant_from_openai_responses([web])
    assert [r.role for r in s.history.rows()] == ["user"], "nothing was recorded"


def test_host_tools_go_out_as_the_host_defined_them(tmp_path: Path) -> None:
    params = {
        "type": "object",
        "properties": {"path": {"type": "string", "minLength": 1}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    s = Session.open(
        tmp_path / "ws",
        model="gpt-4o",
        context_window=64_000,
        durability="none",
        tools=[
            {"name": "read_file", "description": "Read a file.", "parameters": params},
            {
                "type": "function",
                "function": {"name": "grep", "parameters": params, "strict": False},
            },
        ],
    )
    s.add_user("go")
    turn = s.prepare()
    chat = turn.to_openai_chat()["tools"]
    _validate(openai_chat.ChatCompletionFunctionToolParam, chat)
    assert chat[0]["function"] == {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": params,
    }
    assert chat[1]["function"]["strict"] is False
    responses = turn.to_openai_responses()["tools"]
    _validate(openai_responses.FunctionToolParam, responses)
    assert responses[0]["parameters"] == params
    anthropic = turn.to_anthropic()["tools"]
    _validate(anthropic_types.ToolParam, anthropic)
    assert anthropic[1]["input_schema"] == params
    own = [t for t in chat if t["function"]["name"] == "session_history"]
    assert "strict" not in own[0]["function"], "ctxbudget's own tools go as counted"
    own_responses = [t for t in responses if t["name"] == "session_history"]
    assert own_responses[0]["strict"] is False, "Responses takes a missing flag as strict"


def test_converters_send_every_media_part_prepare_counted(tmp_path: Path) -> None:
    """The user's images and files reach every provider shape (and validate there)."""
    import base64

    png = base64.b64encode(
        b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR" + (640).to_bytes(4, "big") + (480).to_bytes(4, "big")
    ).decode()
    s = Session.open(tmp_path / "ws", model="gpt-4o", context_window=64_000, durability="none")
    s.add_user(
        [
            {"type": "text", "text": "compare these"},
            {"type": "media", "media_type": "image/png", "data": png, "detail": "low"},
            {"type": "media", "media_type": "image/jpeg", "url": "https://example.com/b.jpg"},
            {
                "type": "media",
                "media_type": "application/pdf",
                "data": "JVBERi0=",
                "filename": "a.pdf",
                "pages": 1,
            },
        ]
    )
    turn = s.prepare()
    chat = turn.to_openai_chat()["messages"][1]["content"]
    _validate(openai_chat.ChatCompletionMessageParam, turn.to_openai_chat()["messages"])
    assert [p["type"] for p in chat] == ["text", "image_url", "image_url", "file"]
    assert chat[1]["image_url"] == {"url": f"data:image/png;base64,{png}", "detail": "low"}
    assert chat[2]["image_url"] == {"url": "https://example.com/b.jpg"}
    responses = turn.to_openai_responses()["input"]
    _validate(openai_responses.ResponseInputItemParam, responses)
    kinds = [p["type"] for p in responses[0]["content"]]
    assert kinds == ["input_text", "input_image", "input_image", "input_file"]
    anthropic = turn.to_anthropic()["messages"]
    _validate(anthropic_types.MessageParam, anthropic)
    kinds = [b["type"] for b in anthropic[0]["content"]]
    assert kinds == ["text", "image", "image", "document"]
    assert anthropic[0]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": png,
    }


def test_openai_chat_request_counts_what_prepare_counted(tmp_path: Path) -> None:
    """A recorded call's parsed arguments go out as the compact JSON the session counts
    (they went out with spaces: one token more per call than was counted)."""
    s = Session.open(tmp_path, model="gpt-4o", context_window=40_000, durability="none")
    s.set_request(own_tools=[])
    s.add_user("hi")
    s.add_assistant(None, [{"id": "c1", "name": "f", "arguments": {"n": 1, "city": "Zürich"}}])
    s.add_tool_results([{"call_id": "c1", "name": "f", "output": {"ok": True}}])
    turn = s.prepare()
    sent = turn.to_openai_chat()["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"n":1,"city":"Zürich"}'
    assert ctxbudget.count_messages(sent, model="gpt-4o") == turn.decision.projected
