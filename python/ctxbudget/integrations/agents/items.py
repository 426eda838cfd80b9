"""SDK items and transcript rows, both ways.

An SDK item's row carries the parts ctxbudget counts and searches: text, tool calls and
results, and a ``media`` part for every non-text content part (an image, a file, audio),
which the session counts by SPEC §1's media allowances. Each value is stored once: the
row's ``meta.agents`` keeps the item without the values its parts hold, and where each
goes back (so an item comes back exactly, and a large tool result fits a row as it does
in the SDK's own sessions). Rows ctxbudget writes itself
(``add_user``, lead-ins, advisories, continuations) become plain SDK items.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...errors import MediaError
from ...history import Row
from ...media import image_size, pdf_page_count
from ...providers import arguments_json, tool_output_text

__all__ = [
    "AGENTS_KEY",
    "CALL_TO_OUTPUT",
    "fingerprint",
    "for_model",
    "items_of_row",
    "plain",
    "rows_for",
    "stored_item",
]

AGENTS_KEY = "agents"
"""The row meta key of an SDK item: the item without the values its row's parts hold
(``item``) and where each of those comes from (``fills``)."""

CALL_TO_OUTPUT: dict[str, str] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}
"""Tool-call item types and the output type that completes each (the SDK's pairing)."""

_STORE_ONLY_KEYS = ("created_by", "_agents_tool_description", "_agents_tool_title")
"""Keys the SDK may save on an item but strips before it replays the item to a model."""

_TEXT_PART_TYPES = frozenset({"input_text", "output_text", "text", "summary_text"})


def plain(item: Any) -> dict[str, Any]:
    """The item as a plain dict (SDK items may be pydantic models)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        result: dict[str, Any] = dump(exclude_unset=True)
        return result
    raise TypeError(
        f"not an Agents SDK item: {type(item).__name__}; pass the dicts or models the "
        "SDK gives (TResponseInputItem)"
    )


def for_model(item: dict[str, Any]) -> dict[str, Any]:
    """The item as the SDK replays it to a model (without its store-only keys)."""
    if any(k in item for k in _STORE_ONLY_KEYS):
        return {k: v for k, v in item.items() if k not in _STORE_ONLY_KEYS}
    return item


def fingerprint(item: dict[str, Any]) -> str:
    """A content key for matching items the SDK hands over again as fresh copies.

    Compared as replayed, without a reasoning item's ``id`` (the SDK may omit it when it
    replays history), and a message by its role and content only, its text parts by
    their text: a ``RunState`` round trip gives an assistant message of plain text back
    as ``output_text`` parts with a ``status``.
    """
    item = for_model(item)
    if item.get("type") == "reasoning" and "id" in item:
        item = {k: v for k, v in item.items() if k != "id"}
    if item.get("role") in _ROLES and item.get("type", "message") == "message":
        item = {"role": item["role"], "content": _canonical_content(item.get("content"))}
    return json.dumps(item, sort_keys=True, default=str, ensure_ascii=False)


_ROLES = frozenset({"user", "system", "developer", "assistant"})


def _canonical_content(content: Any) -> Any:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, list):
        return content
    return [
        {"text": part["text"]}
        if isinstance(part, Mapping)
        and part.get("type") in _TEXT_PART_TYPES
        and isinstance(part.get("text"), str)
        else part
        for part in content
    ]


# ----- SDK item -> row ----------------------------------------------------------------


def _pdf_pages(part: Mapping[str, Any]) -> int | None:
    """Pages of an inline PDF (``file_data`` as a data URL or bare base64), else None
    (read by the core, :func:`ctxbudget.media.pdf_page_count`)."""
    data = part.get("file_data")
    if not isinstance(data, str):
        return None
    name = str(part.get("filename") or "")
    if data.startswith("data:"):
        if "pdf" not in data.partition(",")[0]:
            return None
    elif not name.lower().endswith(".pdf"):
        return None
    try:
        return pdf_page_count(data)
    except MediaError:
        return None


def _media_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """The ``media`` part counted for a non-text content part.

    An image counts by the provider's rule from its size, read from an inline image's
    header (the data stays in the stored item alone); one known only by URL counts at
    its detail level's maximum. A file counts by the provider's per-page PDF rule (its
    pages read from inline PDF data, else one page); anything else
    ``OTHER_MEDIA_TOKENS``.
    """
    kind = str(part.get("type"))
    if kind == "input_file":
        pages = _pdf_pages(part)
        return {
            "type": "media",
            "media_type": "application/pdf" if pages else "application/octet-stream",
            "pages": pages or 1,
            "source": kind,
        }
    if kind == "input_image":
        image: dict[str, Any] = {"type": "media", "media_type": "image", "source": kind}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        url = part.get("image_url")
        if isinstance(url, str) and url[:5].lower() == "data:":
            try:
                size = image_size(url)
            except MediaError:
                return image  # unreadable: counted at the maximum
            image["width"], image["height"] = size.width, size.height
        return image
    return {"type": "media", "media_type": kind, "source": kind}


def _content_parts(content: Any, path: list[Any], fills: list[list[Any]]) -> list[dict[str, Any]]:
    """The row parts of ``content`` (the item's value at ``path``); ``fills`` learns
    where each text came from, so the stored item need not repeat it."""
    if isinstance(content, str):
        if not content:
            return []
        fills.append([path, 0, "text", "same"])
        return [{"type": "text", "text": content}]
    parts: list[dict[str, Any]] = []
    for n, part in enumerate(content or ()):
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        key = "refusal" if kind == "refusal" else "text"
        if (kind in _TEXT_PART_TYPES or kind == "refusal") and isinstance(part.get(key), str):
            fills.append([[*path, n, key], len(parts), "text", "same"])
            parts.append({"type": "text", "text": part[key]})
        else:
            parts.append(_media_part(part))
    return parts


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_TRANSFORMS: dict[str, Callable[[Any], Any]] = {
    "same": lambda value: value,
    "arguments": arguments_json,
    "compact": _compact_json,
}
"""How a stored item's value is made again from a row part's value."""


def _call_arguments(raw: Any) -> tuple[Any, str]:
    """A call's arguments as the row keeps them (parsed JSON where the model's text
    comes back from it exactly, else the text itself) and the transform that gives the
    text back."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw, "same"
        for how in ("arguments", "compact"):
            if _TRANSFORMS[how](parsed) == raw:
                return parsed, how
    return raw, "same"


def _row_parts(item: dict[str, Any], names: Mapping[str, str]) -> tuple[str, list[Any], list[Any]]:
    """The role and parts of ``item``'s row, and the fills: ``[path in the item, part
    index, part key, transform]`` for every value of the item a part holds."""
    kind = item.get("type")
    fills: list[list[Any]] = []
    if kind == "function_call":
        arguments, how = _call_arguments(item.get("arguments") or "{}")
        if "arguments" in item and item.get("arguments"):
            fills.append([["arguments"], 0, "arguments", how])
        part = {
            "type": "tool_call",
            "id": item.get("call_id"),
            "name": item.get("name"),
            "arguments": arguments,
        }
        return "assistant", [part], fills
    if kind == "function_call_output":
        result: dict[str, Any] = {
            "type": "tool_result",
            "call_id": item.get("call_id"),
            "output": item.get("output"),
        }
        if "output" in item:
            fills.append([["output"], 0, "output", "same"])
        name = names.get(str(item.get("call_id")))
        if name:
            result["name"] = name
        return "tool", [result], fills
    role = item.get("role")
    if role in ("user", "system", "developer", "assistant"):
        parts = _content_parts(item.get("content"), ["content"], fills)
        return ("system" if role == "developer" else str(role)), parts, fills
    # Reasoning and other items: kept whole; their summaries are text the model sees.
    parts = _content_parts(item.get("summary"), ["summary"], fills) if kind == "reasoning" else []
    return "assistant", parts, fills


def _skeleton(item: dict[str, Any], fills: list[list[Any]]) -> dict[str, Any]:
    """``item`` with every value a part holds left out (``None`` in its place, so keys
    keep their order)."""
    out = copy.deepcopy(item)
    for path, _, _, _ in fills:
        _put(out, path, None)
    return out


def _put(item: Any, path: Sequence[Any], value: Any) -> None:
    target = item
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def _row_for(item: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    role, parts, fills = _row_parts(item, names)
    stored = {"item": _skeleton(item, fills), "fills": fills}
    if _rebuilt(stored, parts) != item:
        # A value a part could not give back exactly (never expected): keep it whole.
        stored = {"item": item, "fills": []}
    return {"kind": "message", "role": role, "parts": parts, "meta": {AGENTS_KEY: stored}}


def rows_for(items: Sequence[dict[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Rows for a batch of plain items. ``names`` maps call IDs already stored to tool
    names; a result names its tool even when its call is in the same batch."""
    known = dict(names)
    for item in items:
        if item.get("type") == "function_call":
            known[str(item.get("call_id"))] = str(item.get("name"))
    return [_row_for(item, known) for item in items]


# ----- row -> SDK items ---------------------------------------------------------------


def _rebuilt(stored: Mapping[str, Any], parts: Sequence[Mapping[str, Any]]) -> Any:
    item = copy.deepcopy(stored.get("item"))
    for path, index, key, how in stored.get("fills") or ():
        _put(item, path, _TRANSFORMS[how](parts[index][key]))
    return item


def stored_item(row: Row) -> dict[str, Any] | None:
    """The SDK item a row of ``add_items`` stores, exactly as given; ``None`` for other
    rows. Raises nothing for a row that does not carry one whole: a damaged or
    hand-edited one reads as a row ctxbudget wrote itself."""
    stored = row.meta.get(AGENTS_KEY)
    if isinstance(stored, Mapping):
        try:
            item = _rebuilt(stored, row.parts)
        except (LookupError, TypeError, ValueError):
            return None
        return item if isinstance(item, dict) else None
    # Transcripts written before items were stored once kept a whole copy here.
    whole = row.meta.get("agents_item")
    return copy.deepcopy(whole) if isinstance(whole, dict) else None


def _text(parts: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def items_of_row(row: Row, continued: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The SDK items a row the window fold says is sent shows (none for empty rows).

    ``continued`` is the stored item of the row a continuation repeats, if known: the
    new window then opens with the user's own item, media and all.
    """
    stored = stored_item(row)
    if stored is not None:
        return [stored]
    if row.kind == "continuation" and continued is not None:
        return [dict(continued)]
    text = _text(row.parts)
    if row.role == "tool":
        out = []
        for p in row.parts:
            if p.get("type") == "tool_result":
                output = p.get("output")
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": p.get("call_id"),
                        "output": tool_output_text(output),
                    }
                )
        return out
    if row.role == "assistant":
        out = [{"role": "assistant", "content": text}] if text else []
        for p in row.parts:
            if p.get("type") == "tool_call":
                args = p.get("arguments")
                out.append(
                    {
                        "type": "function_call",
                        "call_id": p.get("id"),
                        "name": p.get("name"),
                        "arguments": arguments_json(args),
                    }
                )
        return out
    if not text:
        return []
    return [{"role": "system" if row.role == "system" else "user", "content": text}]
