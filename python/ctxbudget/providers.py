"""Provider formats: a :class:`~ctxbudget.Turn` as the keyword arguments of the OpenAI
Chat Completions, OpenAI Responses and Anthropic Messages calls, and provider replies
back into the transcript.

The shapes follow the providers' published request types; the tests validate them with
the ``openai`` and ``anthropic`` packages' own typed definitions. No SDK is imported here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._shared import strict_parameters, tool_definition

__all__ = [
    "from_anthropic_message",
    "from_openai_message",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
]

# Keywords OpenAI's strict mode does not accept.
_NOT_STRICT = ("minLength", "maxLength", "minimum", "maximum", "pattern")


def _strict_tool_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return strict_parameters(
        dict(params), required=set(params.get("required", ())), drop=_NOT_STRICT
    )


def _tools(flavor: str, tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        tool_definition(
            flavor,
            t["name"],
            t["description"],
            dict(t["parameters"]),
            _strict_tool_params(t["parameters"]),
        )
        for t in tools
    ]


def _arguments_json(arguments: object) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {})


def to_openai_chat(
    system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``{"messages": [...], "tools": [...]}`` for ``client.chat.completions.create``."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        role = m["role"]
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        elif role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content") or None}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": _arguments_json(c["arguments"]),
                        },
                    }
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        else:
            out.append({"role": "system" if role == "system" else "user", "content": m["content"]})
    result: dict[str, Any] = {"messages": out}
    if tools:
        result["tools"] = _tools("openai", tools)
    return result


def to_openai_responses(
    system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``{"instructions", "input", "tools"}`` for ``client.responses.create``."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
        elif role == "assistant":
            if m.get("content"):
                items.append({"role": "assistant", "content": m["content"]})
            for c in m.get("tool_calls") or ():
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["name"],
                        "arguments": _arguments_json(c["arguments"]),
                    }
                )
        else:
            items.append(
                {"role": "system" if role == "system" else "user", "content": m["content"]}
            )
    result: dict[str, Any] = {"input": items}
    if system:
        result["instructions"] = system
    if tools:
        result["tools"] = _tools("openai_responses", tools)
    return result


def to_anthropic(
    system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``{"system", "messages", "tools"}`` for ``client.messages.create``. Consecutive
    user-side content (text, tool results) is merged into one user message, as the
    Messages API expects turns to alternate."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role = m["role"]
        if role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m["tool_call_id"],
                        "content": m["content"],
                    }
                ],
            )
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for c in m.get("tool_calls") or ():
                args = c["arguments"]
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        args = {"raw": args}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": c["id"],
                        "name": c["name"],
                        "input": args if isinstance(args, dict) else {"value": args},
                    }
                )
            if blocks:
                add("assistant", blocks)
        else:
            add("user", [{"type": "text", "text": m["content"] or " "}])
    result: dict[str, Any] = {"messages": out}
    if system:
        result["system"] = system
    if tools:
        result["tools"] = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in tools
        ]
    return result


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def from_openai_message(message: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """``(text, tool_calls)`` of an OpenAI ``ChatCompletionMessage`` (or its dict)."""
    calls = []
    for call in _get(message, "tool_calls") or ():
        function = _get(call, "function")
        raw = _get(function, "arguments") or "{}"
        try:
            arguments: Any = json.loads(raw)
        except ValueError:
            arguments = raw  # kept as the model wrote it
        calls.append(
            {"id": _get(call, "id"), "name": _get(function, "name"), "arguments": arguments}
        )
    return _get(message, "content"), calls


def from_anthropic_message(message: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """``(text, tool_calls)`` of an Anthropic ``Message`` (or its dict)."""
    texts, calls = [], []
    for block in _get(message, "content") or ():
        kind = _get(block, "type")
        if kind == "text":
            texts.append(_get(block, "text"))
        elif kind == "tool_use":
            calls.append(
                {
                    "id": _get(block, "id"),
                    "name": _get(block, "name"),
                    "arguments": _get(block, "input") or {},
                }
            )
    return ("\n".join(texts) if texts else None), calls
