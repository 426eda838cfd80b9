"""Message objects as the dicts ctxbudget counts: what users pass to
:func:`~ctxbudget.count_messages` besides dicts — OpenAI SDK message objects, pydantic
models and dataclasses of a provider's message shape, LangChain messages. Anything
else is a ``TypeError`` naming the shapes taken, never counted as an object's dump."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["as_message"]

SHAPES = (
    "dicts in the OpenAI Chat, OpenAI Responses or Anthropic shape, OpenAI SDK message "
    "objects, pydantic models or dataclasses of those shapes, or LangChain messages"
)

# LangChain's message types and the role each is sent as.
_LANGCHAIN_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "developer": "developer",
    "tool": "tool",
    "function": "function",
}


def as_message(obj: object) -> Mapping[str, Any]:
    """``obj`` as a message dict (a ``Mapping`` is returned as is)."""
    if isinstance(obj, Mapping):
        return obj
    if _is_langchain_message(obj):
        return _from_langchain(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, type):
        return _checked(dump(mode="json", exclude_none=True), obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _checked(dataclasses.asdict(obj), obj)
    raise TypeError(f"count_messages() takes {SHAPES}; got {type(obj).__name__}")


def _checked(value: object, obj: object) -> Mapping[str, Any]:
    if isinstance(value, Mapping) and ("role" in value or "type" in value):
        return value
    raise TypeError(
        f"count_messages() takes {SHAPES}; a {type(obj).__name__} has neither a 'role' nor "
        "a 'type' field, so it is no message"
    )


def _is_langchain_message(obj: object) -> bool:
    module = type(obj).__module__
    return (
        module.startswith(("langchain_core.", "langchain."))
        and isinstance(getattr(obj, "type", None), str)
        and hasattr(obj, "content")
    )


def _from_langchain(obj: Any) -> dict[str, Any]:
    """A LangChain message as the OpenAI Chat message it is sent as."""
    kind = str(obj.type).removesuffix("MessageChunk").lower()
    role = _LANGCHAIN_ROLES.get(kind) or str(getattr(obj, "role", None) or "user")
    message: dict[str, Any] = {"role": role, "content": _langchain_content(obj.content)}
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name:
        message["name"] = name
    calls = getattr(obj, "tool_calls", None) or []
    if calls:
        message["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("args", {})}
            for c in calls
            if isinstance(c, Mapping)
        ]
    call_id = getattr(obj, "tool_call_id", None)
    if role == "tool" and isinstance(call_id, str):
        message["tool_call_id"] = call_id
    return message


def _langchain_content(content: Any) -> Any:
    """LangChain content: a string, or blocks (strings become text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]
    return content
