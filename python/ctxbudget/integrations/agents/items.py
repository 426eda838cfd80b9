"""SDK items and transcript rows, both ways.

An SDK item is stored whole in its row's ``meta.agents_item`` (so it comes back exactly),
and its row carries the parts ctxbudget counts and searches: text, tool calls and
results, and a ``media`` part for every non-text content part (an image, a file, audio),
which the session counts by SPEC §1's media allowances. Rows ctxbudget writes itself
(``add_user``, lead-ins, advisories, continuations) become plain SDK items.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...history import Row
from ...providers import arguments_json, tool_output_text

__all__ = [
    "CALL_TO_OUTPUT",
    "fingerprint",
    "for_model",
    "items_of_row",
    "plain",
    "rows_for",
]

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
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


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

    Compared as replayed, and without a reasoning item's ``id`` (the SDK may omit it
    when it replays history).
    """
    item = for_model(item)
    if item.get("type") == "reasoning" and "id" in item:
        item = {k: v for k, v in item.items() if k != "id"}
    return json.dumps(item, sort_keys=True, default=str, ensure_ascii=False)


# ----- SDK item -> row ----------------------------------------------------------------


def _pdf_pages(part: Mapping[str, Any]) -> int | None:
    """Pages of an inline PDF (``file_data`` as a data URL or bare base64), else None."""
    data = part.get("file_data")
    if not isinstance(data, str):
        return None
    name = str(part.get("filename") or "")
    if data.startswith("data:"):
        header, _, data = data.partition(",")
        if "pdf" not in header:
            return None
    elif not name.lower().endswith(".pdf"):
        return None
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None
    pages = len(_PDF_PAGE.findall(raw))
    return pages or None


def _media_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """The ``media`` part counted for a non-text content part.

    Images count ``IMAGE_TOKENS``; a file counts ``PDF_PAGE_TOKENS`` per page (its pages
    read from inline PDF data, else one page); anything else counts as one image.
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
    media_type = "image" if kind == "input_image" else kind
    return {"type": "media", "media_type": media_type, "source": kind}


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content or ():
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append({"type": "text", "text": part["refusal"]})
        else:
            parts.append(_media_part(part))
    return parts


def _row_for(item: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    kind = item.get("type")
    meta = {"agents_item": item}
    if kind == "function_call":
        raw = item.get("arguments") or "{}"
        try:
            arguments: Any = json.loads(raw)
        except ValueError:
            arguments = raw
        part = {
            "type": "tool_call",
            "id": item.get("call_id"),
            "name": item.get("name"),
            "arguments": arguments,
        }
        return {"kind": "message", "role": "assistant", "parts": [part], "meta": meta}
    if kind == "function_call_output":
        result: dict[str, Any] = {
            "type": "tool_result",
            "call_id": item.get("call_id"),
            "output": item.get("output"),
        }
        name = names.get(str(item.get("call_id")))
        if name:
            result["name"] = name
        return {"kind": "message", "role": "tool", "parts": [result], "meta": meta}
    role = item.get("role")
    if role in ("user", "system", "developer", "assistant"):
        row_role = "system" if role == "developer" else role
        parts = _content_parts(item.get("content"))
        return {"kind": "message", "role": row_role, "parts": parts, "meta": meta}
    # Reasoning and other items: kept whole; their summaries are text the model sees.
    parts = _content_parts(item.get("summary")) if kind == "reasoning" else []
    return {"kind": "message", "role": "assistant", "parts": parts, "meta": meta}


def rows_for(items: Sequence[dict[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Rows for a batch of plain items. ``names`` maps call IDs already stored to tool
    names; a result names its tool even when its call is in the same batch."""
    known = dict(names)
    for item in items:
        if item.get("type") == "function_call":
            known[str(item.get("call_id"))] = str(item.get("name"))
    return [_row_for(item, known) for item in items]


# ----- row -> SDK items ---------------------------------------------------------------


def _text(parts: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def items_of_row(row: Row, continued: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The SDK items a row the window fold says is sent shows (none for empty rows).

    ``continued`` is the stored item of the row a continuation repeats, if known: the
    new window then opens with the user's own item, media and all.
    """
    stored = row.meta.get("agents_item")
    if isinstance(stored, dict):
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
