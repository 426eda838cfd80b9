"""The rows the loop API records: a user message, the model's reply, tool results, and
which calls a new turn must resolve first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from ..errors import InvalidArgumentError
from ..window import OpenCall, WindowFold

__all__ = [
    "assistant_row",
    "calls_a_turn_interrupts",
    "result_rows",
    "retraction_row",
    "user_row",
]


def user_row(content: str | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A user message: text, or parts that each name their ``type``."""
    if isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    else:
        parts = [dict(p) for p in content]
        if not all(isinstance(p.get("type"), str) for p in parts):
            raise InvalidArgumentError(
                "every part needs a 'type' (text, tool_call, tool_result, media)"
            )
    return {"kind": "message", "role": "user", "parts": parts}


def assistant_row(
    text: str | None, tool_calls: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]
) -> dict[str, Any]:
    """The model's reply: text and/or tool calls (``id``, ``name``, ``arguments``)."""
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"type": "text", "text": text})
    for call in tool_calls:
        if not isinstance(call.get("id"), str) or not isinstance(call.get("name"), str):
            raise InvalidArgumentError("each tool call needs a string 'id' and 'name'")
        parts.append(
            {
                "type": "tool_call",
                "id": call["id"],
                "name": call["name"],
                "arguments": call.get("arguments", {}),
            }
        )
    row: dict[str, Any] = {"kind": "message", "role": "assistant", "parts": parts}
    if meta:
        row["meta"] = dict(meta)
    return row


def retraction_row(seq: int) -> dict[str, Any]:
    """The row that hides row ``seq`` from every later request."""
    return {"kind": "retraction", "role": "system", "meta": {"retracts": seq}}


def result_rows(results: Sequence[Mapping[str, Any]], fold: WindowFold) -> list[dict[str, Any]]:
    """One tool row per result (``call_id``, ``name``, ``output``); a second result for
    a call of the window is an :class:`~ctxbudget.InvalidArgumentError`."""
    rows = []
    seen: set[str] = set()
    for res in results:
        call_id = res.get("call_id")
        if not isinstance(call_id, str):
            raise InvalidArgumentError("each tool result needs a string 'call_id'")
        if call_id in seen or fold.is_answered(call_id):
            raise InvalidArgumentError(
                f"tool call {call_id!r} already has a result in window "
                f"{fold.window_id}; nothing was recorded (see Session.open_calls)"
            )
        seen.add(call_id)
        part = {"type": "tool_result", "call_id": call_id, "output": res.get("output")}
        if isinstance(res.get("name"), str):
            part["name"] = res["name"]
        rows.append({"kind": "message", "role": "tool", "parts": [part]})
    return rows


def calls_a_turn_interrupts(
    rows: Sequence[Mapping[str, Any]], fold: WindowFold, left_open: AbstractSet[str]
) -> list[OpenCall]:
    """The calls left open by a stopped process that ``rows`` would leave behind a new
    user message (those the batch answers itself excepted)."""
    if not fold.open_calls:
        return []
    if not any(r.get("kind") == "message" and r.get("role") == "user" for r in rows):
        return []
    answered = {
        str(p.get("call_id"))
        for r in rows
        for p in r.get("parts") or ()
        if isinstance(p, Mapping) and p.get("type") == "tool_result"
    }
    return [c for c in fold.open_calls if c.id in left_open and c.id not in answered]
