"""LangChain messages and tools as ctxbudget records and counts them, and the window
back as LangChain messages."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ...errors import InvalidArgumentError
from ...session import KeyedMessage, Turn
from ...tokens import count_messages

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import BaseTool

__all__ = ["keyed", "token_counter", "tool_definitions", "window_messages"]


def keyed(messages: Iterable[BaseMessage]) -> list[KeyedMessage]:
    """The messages a LangChain agent's state holds as keyed messages (by their IDs).
    System messages are left out: the system text is the agent's ``system_prompt``,
    which the session sends and counts as the request's system text."""
    out = []
    for m in messages:
        if m.type == "system":
            continue
        if not m.id:
            raise InvalidArgumentError(
                f"a {type(m).__name__} without an ID cannot be recorded once: LangGraph "
                "gives every message of the state one (add_messages); give it an id"
            )
        out.append(KeyedMessage.from_chat(m.id, m))
    return out


def with_ids(messages: Sequence[BaseMessage]) -> None:
    """Gives every message without an ID one (in place), as LangGraph's ``add_messages``
    would: the reply is recorded under the ID the state will keep for it."""
    for m in messages:
        if not m.id:
            m.id = str(uuid.uuid4())


def tool_definitions(tools: Sequence[BaseTool | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tools a LangChain model is bound to, as OpenAI tool definitions (what
    ``bind_tools`` sends; a provider's built-in tool dict as given)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    out = []
    for t in tools:
        if isinstance(t, Mapping) and "type" in t and t.get("type") != "function":
            out.append(dict(t))
        else:
            out.append(convert_to_openai_tool(t))
    return out


def window_messages(turn: Turn) -> tuple[str, list[BaseMessage]]:
    """The turn's system text and its window as LangChain messages."""
    from langchain_core.messages import convert_to_messages

    chat = turn.to_openai_chat()["messages"]
    body = [m for m in chat if m.get("role") != "system" or m is not chat[0] or not turn.system]
    return turn.system, list(convert_to_messages(body))


def token_counter(model: str | None = None, *, encoding: str | None = None) -> Any:
    """A ``token_counter`` for LangChain's ``trim_messages`` that counts LangChain
    messages as ctxbudget counts a request (SPEC §1: text, tool calls, framing), for
    ``model``'s tokenizer or ``encoding``."""
    if model is None and encoding is None:
        raise InvalidArgumentError("token_counter needs model= or encoding=")

    def count(messages: Sequence[BaseMessage]) -> int:
        return count_messages(cast(Any, list(messages)), model=model, encoding=encoding)

    return count
