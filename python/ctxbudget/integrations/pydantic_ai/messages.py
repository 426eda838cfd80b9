"""Pydantic AI's messages as ctxbudget records and counts them, and the window back.

Pydantic AI's messages carry no ID of their own, so each is keyed by what identifies it
in a conversation: a tool result by its tool call's ID, a user prompt and a model
response by the time they were made (to the microsecond) and their place in the message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...session import KeyedMessage, Turn

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, UserContent
    from pydantic_ai.tools import ToolDefinition

__all__ = ["as_chat", "keyed", "system_text", "tool_definitions", "window_messages"]


def _stamp(part: Any, fallback: Any) -> str:
    ts = getattr(part, "timestamp", None) or fallback
    return ts.isoformat() if ts is not None else "-"


def _user_content(content: str | Sequence[UserContent]) -> Any:
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for c in content:
        if isinstance(c, str):
            out.append({"type": "text", "text": c})
        else:
            kind = str(getattr(c, "kind", "file"))
            out.append({"type": "image_url" if "image" in kind else kind})
    return out


def as_chat(messages: Iterable[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
    """Each message part that is sent as a chat message, keyed, in the OpenAI Chat shape
    (system prompt parts left out: :func:`system_text` gives them)."""
    from pydantic_ai.messages import (
        ModelRequest,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[tuple[str, dict[str, Any]]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for n, part in enumerate(message.parts):
                if isinstance(part, UserPromptPart):
                    key = f"user:{_stamp(part, message.timestamp)}:{n}"
                    out.append((key, {"role": "user", "content": _user_content(part.content)}))
                elif isinstance(part, ToolReturnPart):
                    out.append(
                        (
                            f"tool:{part.tool_call_id}",
                            {
                                "role": "tool",
                                "tool_call_id": part.tool_call_id,
                                "name": part.tool_name,
                                "content": part.model_response_str(),
                            },
                        )
                    )
                elif isinstance(part, RetryPromptPart):
                    if part.tool_name is not None:
                        retry: dict[str, Any] = {
                            "role": "tool",
                            "tool_call_id": part.tool_call_id,
                            "name": part.tool_name,
                            "content": part.model_response(),
                        }
                        out.append((f"retry:{part.tool_call_id}", retry))
                    else:
                        key = f"retry:{_stamp(part, message.timestamp)}:{n}"
                        out.append((key, {"role": "user", "content": part.model_response()}))
        else:
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {"id": p.tool_call_id, "name": p.tool_name, "arguments": p.args_as_dict()}
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            reply: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                reply["tool_calls"] = calls
            rid = message.provider_response_id or ""
            out.append((f"response:{_stamp(None, message.timestamp)}:{rid}", reply))
    return out


def keyed(messages: Iterable[ModelMessage]) -> list[KeyedMessage]:
    """The history's messages as keyed messages (see the module's note on keys)."""
    return [KeyedMessage.from_chat(key, chat) for key, chat in as_chat(messages)]


def system_text(messages: Iterable[ModelMessage], instructions: Iterable[str]) -> str:
    """What the request sends as system text: the history's system prompt parts, then
    the agent's instructions."""
    from pydantic_ai.messages import ModelRequest, SystemPromptPart

    parts = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, SystemPromptPart)
    ]
    return "\n\n".join(x for x in [*parts, *instructions] if x)


def tool_definitions(tools: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """Pydantic AI's tool definitions as ctxbudget counts them."""
    return [
        {
            "name": t.name,
            "description": t.description or "",
            "parameters": t.parameters_json_schema,
        }
        for t in tools
    ]


def window_messages(turn: Turn) -> list[ModelMessage]:
    """The turn's window as Pydantic AI messages (its system text goes to the request's
    instructions)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    names: dict[str, str] = {}
    out: list[ModelMessage] = []
    pending: list[Any] = []

    def flush() -> None:
        if pending:
            out.append(ModelRequest(parts=list(pending)))
            pending.clear()

    for m in turn.messages:
        role = m.get("role")
        if role == "assistant":
            flush()
            parts: list[Any] = [TextPart(str(m["content"]))] if m.get("content") else []
            for c in m.get("tool_calls") or ():
                names[str(c["id"])] = str(c["name"])
                parts.append(ToolCallPart(tool_name=c["name"], args=_args(c), tool_call_id=c["id"]))
            out.append(ModelResponse(parts=parts))
        elif role == "tool":
            call_id = str(m["tool_call_id"])
            pending.append(
                ToolReturnPart(
                    tool_name=names.get(call_id, str(m.get("name") or "")),
                    content=m["content"],
                    tool_call_id=call_id,
                )
            )
        elif role == "system":
            pending.append(SystemPromptPart(str(m["content"])))
        else:
            pending.append(UserPromptPart(str(m["content"])))
    flush()
    return out


def _args(call: Mapping[str, Any]) -> Any:
    args = call.get("arguments")
    return args if isinstance(args, (dict, str)) else json.dumps(args)
