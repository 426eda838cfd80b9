"""Provider formats: a :class:`~ctxbudget.Turn` as the keyword arguments of the OpenAI
Chat Completions, OpenAI Responses and Anthropic Messages calls, and provider replies
back into the transcript.

The shapes follow the providers' published request types; the tests validate them with
the ``openai`` and ``anthropic`` packages' own typed definitions. No SDK is imported here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._shared import tool_definition
from .errors import InvalidArgumentError

__all__ = [
    "OpenAIReply",
    "arguments_json",
    "from_anthropic_message",
    "from_openai_message",
    "from_openai_response",
    "get_field",
    "normalize_tool",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
    "tool_output_text",
]


def _tools(flavor: str, tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        if _is_builtin(t):
            out.append(dict(t))  # a provider's built-in tool: sent as the host gave it
            continue
        params = dict(t["parameters"])
        # Every function tool is sent with the schema the session counted. A host tool
        # keeps its own strict flag (normalize_tool); ctxbudget's tools carry none and go
        # non-strict: OpenAI's strict form (every property required, nullable types)
        # renders longer than the schema counted, and they answer any arguments anyway.
        strict = t.get("strict")
        definition = tool_definition(flavor, t["name"], t["description"], params, params)
        if flavor == "openai":
            if strict is None:
                definition["function"].pop("strict", None)  # Chat Completions: off
            else:
                definition["function"]["strict"] = bool(strict)
        elif flavor == "openai_responses":
            # The Responses API takes a missing flag as strict: say off unless asked.
            definition["strict"] = bool(strict)
        out.append(definition)
    return out


def _is_builtin(tool: Mapping[str, Any]) -> bool:
    """A provider's built-in tool (``{"type": "web_search", ...}``), kept as given."""
    kind = tool.get("type")
    return isinstance(kind, str) and kind != "function"


def normalize_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A host tool definition in ctxbudget's neutral form ``{"name", "description",
    "parameters", "strict"}``, from that form or from an OpenAI Chat
    (``{"type": "function", "function": {...}}``), OpenAI Responses
    (``{"type": "function", "name": ...}``) or Anthropic (``input_schema``) definition.
    Host tools are sent as defined: ``strict`` is kept as given (``None``: not sent)."""
    if not isinstance(tool, Mapping):
        raise InvalidArgumentError(f"a tool definition must be a dict, got {type(tool).__name__}")
    spec: Mapping[str, Any] = tool
    if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
        spec = tool["function"]
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"a tool definition needs a non-empty string 'name': {tool!r}")
    params = spec.get("parameters", spec.get("input_schema", {"type": "object", "properties": {}}))
    if not isinstance(params, Mapping):
        raise InvalidArgumentError(f"tool {name!r}: 'parameters' must be a JSON Schema object")
    description = spec.get("description") or ""
    if not isinstance(description, str):
        raise InvalidArgumentError(f"tool {name!r}: 'description' must be a string")
    strict = spec.get("strict")
    return {
        "name": name,
        "description": description,
        "parameters": dict(params),
        "strict": strict if isinstance(strict, bool) else None,
    }


def arguments_json(arguments: object) -> str:
    """Tool-call arguments as sent: the model's own text, or compact JSON that keeps
    non-ASCII characters as they are."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments or {}, ensure_ascii=False, separators=(",", ":"))


def tool_output_text(output: object) -> str:
    """A tool result as sent: the host's text as given, anything else as JSON that keeps
    non-ASCII characters as they are."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _media_source(part: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """``(media_type, url, base64_data)`` of a ``media`` part: its ``url``, or its
    ``data`` (base64 text, or a ``data:`` URL whose type wins over ``media_type``)."""
    media_type = str(part.get("media_type") or "application/octet-stream")
    url = part.get("url")
    data = part.get("data")
    if isinstance(data, str) and data[:5].lower() == "data:":
        head, _, payload = data.partition(",")
        declared = head[5:].split(";")[0]
        return (declared or media_type), None, payload
    return (
        media_type,
        url if isinstance(url, str) else None,
        data if isinstance(data, str) else None,
    )


def _media_blocks(flavor: str, message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The message's ``media`` parts as ``flavor``'s content blocks: images and files
    that carry their data or URL (a part with neither cannot be sent and is left out)."""
    blocks: list[dict[str, Any]] = []
    for part in message.get("media") or ():
        media_type, url, data = _media_source(part)
        if url is None and data is None:
            continue
        image = media_type == "image" or media_type.startswith("image/")
        ref = url if url is not None else f"data:{media_type};base64,{data}"
        detail = part.get("detail")
        filename = part.get("filename")
        if flavor == "anthropic":
            source = (
                {"type": "url", "url": url}
                if url is not None
                else {"type": "base64", "media_type": media_type, "data": data}
            )
            blocks.append({"type": "image" if image else "document", "source": source})
        elif image and flavor == "openai":
            spec: dict[str, Any] = {"url": ref}
            if detail in ("low", "high", "auto"):
                spec["detail"] = detail
            blocks.append({"type": "image_url", "image_url": spec})
        elif image:
            blocks.append(
                {
                    "type": "input_image",
                    "image_url": ref,
                    "detail": detail if detail in ("low", "high", "auto") else "auto",
                }
            )
        elif flavor == "openai":
            file: dict[str, Any] = {"file_data": ref}
            if isinstance(filename, str):
                file["filename"] = filename
            blocks.append({"type": "file", "file": file})
        else:
            block: dict[str, Any] = {"type": "input_file"}
            block["file_url" if url is not None else "file_data"] = ref
            if isinstance(filename, str):
                block["filename"] = filename
            blocks.append(block)
    return blocks


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
                            "arguments": arguments_json(c["arguments"]),
                        },
                    }
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        else:
            media = _media_blocks("openai", m)
            content: Any = m["content"]
            if media:
                content = [{"type": "text", "text": m["content"]}, *media]
            out.append({"role": "system" if role == "system" else "user", "content": content})
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
            items.extend(dict(r) for r in m.get("reasoning") or ())
            if m.get("content"):
                items.append({"role": "assistant", "content": m["content"]})
            for c in m.get("tool_calls") or ():
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["name"],
                        "arguments": arguments_json(c["arguments"]),
                    }
                )
        else:
            media = _media_blocks("openai_responses", m)
            content = m["content"]
            if media:
                content = [{"type": "input_text", "text": m["content"]}, *media]
            items.append({"role": "system" if role == "system" else "user", "content": content})
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
            add(
                "user",
                [{"type": "text", "text": m["content"] or " "}, *_media_blocks("anthropic", m)],
            )
    result: dict[str, Any] = {"messages": out}
    if system:
        result["system"] = system
    if tools:
        result["tools"] = [
            dict(t)
            if _is_builtin(t)
            else {
                "name": t["name"],
                "description": t["description"],
                "input_schema": t["parameters"],
            }
            for t in tools
        ]
    return result


def get_field(obj: Any, key: str) -> Any:
    """``obj[key]`` of a dict, else the attribute ``key`` of an SDK object (``None``
    when it has neither)."""
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def from_openai_message(message: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """``(text, tool_calls)`` of an OpenAI ``ChatCompletionMessage`` (or its dict)."""
    if get_field(message, "output") is not None and get_field(message, "choices") is None:
        raise InvalidArgumentError(
            "this is a Responses API reply; record it with add_assistant_from_openai_responses()"
        )
    if get_field(message, "choices") is not None:
        raise InvalidArgumentError(
            "pass the message (completion.choices[0].message), not the whole completion"
        )
    calls = []
    for call in get_field(message, "tool_calls") or ():
        function = get_field(call, "function")
        raw = get_field(function, "arguments") or "{}"
        try:
            arguments: Any = json.loads(raw)
        except ValueError:
            arguments = raw  # kept as the model wrote it
        calls.append(
            {
                "id": get_field(call, "id"),
                "name": get_field(function, "name"),
                "arguments": arguments,
            }
        )
    return get_field(message, "content"), calls


def _dump(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return {k: v for k, v in item.items() if v is not None}
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        out = dump(mode="json", exclude_none=True)
        if isinstance(out, dict):
            return out
    raise InvalidArgumentError(
        f"a Responses output item must be a dict or an openai model, got {type(item).__name__}"
    )


@dataclass(frozen=True)
class OpenAIReply:
    """What :func:`from_openai_response` read from a Responses API reply."""

    text: str | None
    """The assistant's text (output messages joined; a refusal included as its text)."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """``{"id", "name", "arguments"}`` per ``function_call`` (``id`` is its ``call_id``)."""
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    """Reasoning items, whole (summary, encrypted content), to send back as they were."""
    refusal: bool = False
    """True when the model refused (its text is the refusal)."""


def _function_arguments(raw: object) -> Any:
    if not isinstance(raw, str):
        return raw if raw is not None else {}
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw  # kept as the model wrote it


def from_openai_response(response: Any) -> OpenAIReply:
    """Reads an OpenAI Responses API reply: a ``Response`` (or its dict) or its
    ``output`` list. Output messages give the text (refusals included), ``function_call``
    items the tool calls and ``reasoning`` items are kept whole; any other item is an
    :class:`~ctxbudget.InvalidArgumentError` naming it, never dropped silently."""
    output = response if isinstance(response, Sequence) else get_field(response, "output")
    if output is None or isinstance(output, (str, bytes)):
        raise InvalidArgumentError(
            "add_assistant_from_openai_responses() takes a Responses API reply "
            "(client.responses.create(...)) or its 'output' list"
        )
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    refusal = False
    for n, raw in enumerate(output):
        item = _dump(raw)
        kind = item.get("type")
        if kind == "reasoning":
            reasoning.append(item)
        elif kind == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "name": item.get("name"),
                    "arguments": _function_arguments(item.get("arguments")),
                }
            )
        elif kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "refusal":
                    refusal = True
                    texts.append(str(part.get("refusal", "")))
        else:
            raise InvalidArgumentError(
                f"Responses output item {n} has type {kind!r}, which ctxbudget does not "
                "record; record messages, function calls and reasoning, and handle "
                "built-in tool items in your loop"
            )
    return OpenAIReply(
        text="\n".join(texts) if texts else None,
        tool_calls=calls,
        reasoning=reasoning,
        refusal=refusal,
    )


def from_anthropic_message(message: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """``(text, tool_calls)`` of an Anthropic ``Message`` (or its dict)."""
    texts, calls = [], []
    for block in get_field(message, "content") or ():
        kind = get_field(block, "type")
        if kind == "text":
            texts.append(get_field(block, "text"))
        elif kind == "tool_use":
            calls.append(
                {
                    "id": get_field(block, "id"),
                    "name": get_field(block, "name"),
                    "arguments": get_field(block, "input") or {},
                }
            )
    return ("\n".join(texts) if texts else None), calls
