"""Recording a message list a framework owns, by the messages' stable IDs.

A framework that keeps the conversation itself (LangGraph state, Pydantic AI's message
history) hands the whole list to :meth:`Session.sync_messages` before each model call.
Each message is recorded once under its key: the row carries ``meta.key`` and a digest
of what it says (``meta.key_digest``), and which keys are recorded is read back from the
transcript (:class:`KeyIndex`), never kept only in memory — so a second process, a
restarted one or a resumed run sending the same list records nothing twice. A message
that says something else under a key already recorded is a
:class:`~ctxbudget.MessageChangedError`, not a second copy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._messages import as_message
from ..errors import InvalidArgumentError, MessageChangedError
from ..history import History
from ..window import WindowFold
from . import rows as make

__all__ = [
    "KEY",
    "KEY_DIGEST",
    "KeyIndex",
    "KeyedMessage",
    "SyncReport",
    "plan",
    "stored_row",
    "unrecorded",
]

KEY = "key"
"""The row meta key holding the framework's ID of the message the row records."""
KEY_DIGEST = "key_digest"
"""The row meta key holding the digest of what the keyed message says (its role and
parts), which a later sync compares against."""


@dataclass(frozen=True)
class KeyedMessage:
    """A message of a framework's list and its stable ID: ``row`` is a transcript row as
    :meth:`Session.append_turn` takes it (``kind`` ``"message"``, ``role``, ``parts``)."""

    key: str
    row: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise InvalidArgumentError(f"a message key must be a non-empty str, got {self.key!r}")
        if not isinstance(self.row, Mapping) or self.row.get("kind", "message") != "message":
            raise InvalidArgumentError(
                f"keyed message {self.key!r}: the row must be a message row "
                "({'kind': 'message', 'role': ..., 'parts': [...]})"
            )
        if self.row.get("role") not in ("user", "assistant", "tool"):
            raise InvalidArgumentError(
                f"keyed message {self.key!r}: role must be 'user', 'assistant' or 'tool', "
                f"got {self.row.get('role')!r} (system text goes to Session.set_request)"
            )

    @classmethod
    def from_chat(cls, key: str, message: Any) -> KeyedMessage:
        """A message in the OpenAI Chat shape (a dict, or an object
        :func:`ctxbudget.count_messages` takes: LangChain messages, OpenAI SDK objects)
        as a keyed row: user text and content parts, assistant text and tool calls, a
        tool result. Non-text content parts are recorded as media parts, counted at the
        provider's maximum for their kind."""
        m = as_message(message)
        role = m.get("role")
        if role == "user":
            return cls(key, make.user_row(_user_parts(m.get("content"))))
        if role == "assistant":
            calls = [_call(c) for c in m.get("tool_calls") or ()]
            return cls(key, make.assistant_row(_text(m.get("content")) or None, calls, {}))
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                raise InvalidArgumentError(f"tool message {key!r} has no string 'tool_call_id'")
            part: dict[str, Any] = {
                "type": "tool_result",
                "call_id": call_id,
                "output": _text(m.get("content")),
            }
            if isinstance(m.get("name"), str):
                part["name"] = m["name"]
            return cls(key, {"kind": "message", "role": "tool", "parts": [part]})
        raise InvalidArgumentError(
            f"message {key!r} has role {role!r}: only user, assistant and tool messages are "
            "recorded (system text goes to Session.set_request)"
        )

    def digest(self) -> str:
        """What the message says, as a short stable digest (role and parts)."""
        body = {"role": self.row.get("role"), "parts": self.row.get("parts") or []}
        text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def _call(call: Any) -> dict[str, Any]:
    """A tool call in the neutral shape from OpenAI Chat's or the neutral one."""
    if not isinstance(call, Mapping):
        raise InvalidArgumentError(f"a tool call must be a mapping, got {type(call).__name__}")
    function = call.get("function")
    if isinstance(function, Mapping):
        raw = function.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            arguments = raw
        return {"id": call.get("id"), "name": function.get("name"), "arguments": arguments}
    return {"id": call.get("id"), "name": call.get("name"), "arguments": call.get("arguments")}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, Mapping) and p.get("type") in ("text", "input_text", "output_text")
        )
    return json.dumps(content, ensure_ascii=False, default=str)


def _user_parts(content: Any) -> str | list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[dict[str, Any]] = []
    for p in content if isinstance(content, Sequence) else ():
        if isinstance(p, str):
            parts.append({"type": "text", "text": p})
        elif isinstance(p, Mapping) and isinstance(p.get("text"), str):
            parts.append({"type": "text", "text": p["text"]})
        elif isinstance(p, Mapping):
            kind = str(p.get("type") or "file")
            media = "image" if "image" in kind else "application/octet-stream"
            parts.append({"type": "media", "media_type": media, "source": kind})
    return parts


@dataclass(frozen=True)
class SyncReport:
    """What one :meth:`Session.sync_messages` did."""

    recorded: dict[str, int] = field(default_factory=dict)
    """Keys recorded by this call and the seq of each one's row."""
    already: dict[str, int] = field(default_factory=dict)
    """Keys found already recorded (by any process, in any window) and their rows' seqs."""
    unanswerable: tuple[str, ...] = ()
    """Keys of tool results not recorded because their call already has a result in the
    window (recorded as interrupted by a process that stopped mid-step): the provider
    would refuse a second result for one call."""


class KeyIndex:
    """Which keys the transcript records, with each one's digest and seq: read from
    every row of the transcript once, then from the rows appended since (any writer's),
    so it is the transcript's answer, not this process's memory. A soft clear and a
    retraction hide rows from requests, but their keys stay recorded: a message the
    framework still holds is not written again."""

    __slots__ = ("_keys", "_next")

    def __init__(self) -> None:
        self._keys: dict[str, tuple[str, int]] = {}
        self._next = 0

    @property
    def last_seq(self) -> int:
        """The last seq read (0 before any row)."""
        return max(self._next - 1, 0)

    def catch_up(self, history: History) -> None:
        """Reads the rows appended since the last read."""
        for row in history.rows(since_seq=self._next):
            key = row.meta.get(KEY)
            digest = row.meta.get(KEY_DIGEST)
            if isinstance(key, str) and isinstance(digest, str):
                self._keys.setdefault(key, (digest, row.seq))
            self._next = row.seq + 1

    def get(self, key: str) -> tuple[str, int] | None:
        """``(digest, seq)`` of ``key``'s row, if recorded."""
        return self._keys.get(key)


def plan(
    index: KeyIndex, fold: WindowFold, messages: Sequence[KeyedMessage]
) -> tuple[list[KeyedMessage], SyncReport]:
    """What a sync of ``messages`` writes on the transcript as ``index`` and ``fold``
    read it: the messages to record, and the report without them (the keys found
    already recorded, and the results left out because their call has one)."""
    fresh = unrecorded(index, messages)
    unanswerable = tuple(
        m.key
        for m in fresh
        if m.row.get("role") == "tool"
        and any(
            p.get("type") == "tool_result" and fold.is_answered(str(p.get("call_id")))
            for p in m.row.get("parts") or ()
        )
    )
    already = {}
    for m in messages:
        found = index.get(m.key)
        if found is not None:
            already[m.key] = found[1]
    return [m for m in fresh if m.key not in unanswerable], SyncReport({}, already, unanswerable)


def stored_row(message: KeyedMessage) -> dict[str, Any]:
    """The row that records ``message``: its row with the key and digest in ``meta``."""
    meta = dict(message.row.get("meta") or {})
    meta[KEY] = message.key
    meta[KEY_DIGEST] = message.digest()
    return {**message.row, "meta": meta}


def unrecorded(index: KeyIndex, messages: Sequence[KeyedMessage]) -> list[KeyedMessage]:
    """The messages ``index`` does not record yet, in order (a key given twice counts
    once). Raises :class:`~ctxbudget.MessageChangedError` for a message that says
    something else than the one recorded under its key (or given twice in the list)."""
    out: list[KeyedMessage] = []
    pending: dict[str, str] = {}
    for m in messages:
        if not isinstance(m, KeyedMessage):
            raise InvalidArgumentError(
                f"sync_messages takes KeyedMessage objects, got {type(m).__name__}"
            )
        digest = m.digest()
        known = index.get(m.key)
        seen = known[0] if known is not None else pending.get(m.key)
        if seen is None:
            pending[m.key] = digest
            out.append(m)
        elif seen != digest:
            where = f"row {known[1]}" if known is not None else "an earlier message of the list"
            raise MessageChangedError(
                f"message {m.key!r} changed since it was recorded ({where}); nothing was "
                "recorded. A framework message keeps its ID only while it says the same: "
                "give an edited message a new ID, or retract the old row "
                "(Session.retract) and record the new one under a new ID",
                key=m.key,
                seq=known[1] if known is not None else None,
            )
    return out
