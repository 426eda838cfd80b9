"""What a request counts: the one formula for the session's decisions and the plot.

A request is the system text (the host's, ctxbudget's window addition and whatever
context-only hooks add), every visible message of the window, and every advertised tool
schema (the host's and ctxbudget's), passed through the unrestricted hooks; it counts by
SPEC §1 (:func:`~ctxbudget.tokens.request_tokens`). :func:`row_messages` is the one rule
for what a transcript row sends, and :class:`WindowTokens` keeps the window's messages
and their tokens as the window fold reads rows, so a step costs O(new rows).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from .. import _ctxbudget
from ..history import Row
from ..prompts import Capabilities, PromptContext, Prompts
from ..providers import tool_output_text
from ..tokens import Encoding, RequestProfile, messages_tokens, request_tokens
from ..window import WindowChange, WindowFold
from .types import RequestHook

__all__ = [
    "CALIBRATION_KEYS",
    "Anchor",
    "Prefix",
    "Requests",
    "WindowTokens",
    "carried_calibration",
    "row_messages",
    "text_of",
]

_SENT_AS_USER = ("lead_in", "advisory", "continuation")


def text_of(parts: Sequence[Mapping[str, Any]]) -> str:
    """The text parts of a row, joined by newlines."""
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def row_messages(row: Row, *, mode_active: bool) -> list[dict[str, Any]]:
    """The provider-neutral messages a row sends, if the window fold says it is sent
    (other kinds render none). In token-budget mode a user message ends with its item
    ID (``[id: N]``)."""
    text = text_of(row.parts)
    if row.kind != "message" and row.kind not in _SENT_AS_USER:
        return []
    if row.kind in _SENT_AS_USER:
        return [{"role": "user", "content": text, "item_id": row.id, "kind": row.kind}]
    if row.role == "tool":
        return [
            {
                "role": "tool",
                "tool_call_id": p.get("call_id"),
                "name": p.get("name"),
                "content": tool_output_text(p.get("output")),
            }
            for p in row.parts
            if p.get("type") == "tool_result"
        ]
    message: dict[str, Any] = {"role": row.role, "content": text, "item_id": row.id}
    if row.role == "user" and mode_active:
        message["content"] = f"{text}\n\n[id: {row.id}]"
    calls = [p for p in row.parts if p.get("type") == "tool_call"]
    if calls:
        message["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
            for c in calls
        ]
    if any(p.get("type") == "media" for p in row.parts):
        message["media"] = [p for p in row.parts if p.get("type") == "media"]
    reasoning = row.meta.get("reasoning")
    if row.role == "assistant" and isinstance(reasoning, list) and reasoning:
        message["reasoning"] = reasoning
    return [message]


@dataclass(frozen=True, slots=True)
class Anchor:
    """A request whose input tokens a provider reported (or a count endpoint counted),
    bound to what was sent: the prefix's fingerprint, the last seq read and the number
    of visible rows it carried (``meta.request`` of the reply that answered it)."""

    reported: int
    profile: int
    """The profile's (uncalibrated) count of the same request."""
    overhead: int
    """The part of ``profile`` that was frame, system text and tools."""
    last_seq: int
    rows: int
    fingerprint: str
    messages_fp: str | None = None
    """What fixed how its messages were rendered (:meth:`Requests.messages_fp`;
    ``None`` in replies recorded before it was)."""

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Anchor | None:
        """The anchor a reply row records, if it records a whole one."""
        usage, request = meta.get("usage"), meta.get("request")
        if not isinstance(usage, Mapping) or not isinstance(request, Mapping):
            return None
        fields = (
            usage.get("input_tokens"),
            request.get("profile"),
            request.get("overhead", 0),
            request.get("last_seq"),
            request.get("rows"),
        )
        fp, messages_fp = request.get("fp"), request.get("messages_fp")
        counts = [v for v in fields if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
        if not isinstance(fp, str) or len(counts) != len(fields):
            return None
        reported, profile, overhead, last_seq, rows = counts
        return cls(
            reported,
            profile,
            min(overhead, profile),
            last_seq,
            rows,
            fp,
            messages_fp if isinstance(messages_fp, str) else None,
        )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


CALIBRATION_KEYS = (
    "reported",
    "estimated",
    "step_reported",
    "step_estimated",
    "head_reported",
    "head_messages",
    "head_overhead",
)
"""The calibration sums, in the order the core takes them (``ctxbudget::anchor``)."""

Sums = tuple[int, int, int, int, int, int, int]
_NO_SUMS: Sums = (0, 0, 0, 0, 0, 0, 0)


def carried_calibration(meta: Mapping[str, Any]) -> Sums:
    """The calibration sums a boundary row carries into its window (``meta.calibration``)."""
    cal = meta.get("calibration")
    if not isinstance(cal, Mapping):
        return _NO_SUMS
    values = [cal.get(k, 0) for k in CALIBRATION_KEYS]
    if not all(_count(v) for v in values):
        return _NO_SUMS
    r, e, sr, se, hr, hm, ho = (int(v) for v in values)
    return (r, e, sr, se, hr, hm, ho)


class WindowTokens:
    """The window's visible messages and their tokens (without request framing or
    system text), updated from each :class:`~ctxbudget.window.WindowChange`, and the
    anchors its replies record (with the calibration sums over them)."""

    __slots__ = (
        "_anchors",
        "_calibration",
        "_carried",
        "_encoding",
        "_messages",
        "_mode_active",
        "_profile",
        "_tokens",
        "_total",
        "_visible",
    )

    def __init__(
        self, encoding: Encoding, *, mode_active: bool, profile: RequestProfile = "openai_chat"
    ) -> None:
        self._encoding = encoding
        self._profile: RequestProfile = profile
        self._mode_active = mode_active
        self._messages: dict[int, list[dict[str, Any]]] = {}
        self._tokens: dict[int, int] = {}
        self._total = 0
        # The visible messages in order, extended as rows arrive (None: rebuild).
        self._visible: list[dict[str, Any]] | None = []
        # Anchors recorded by the window's visible replies, by seq (oldest first).
        self._anchors: dict[int, Anchor] = {}
        # Calibration sums the window's boundary carried over from the windows before.
        self._carried: Sums = _NO_SUMS
        self._calibration: tuple[tuple[int, int, Sums], Sums] | None = None

    def apply(self, change: WindowChange, fold: WindowFold) -> None:
        """Counts the rows a fold step found sent, and uncounts the rows its
        retractions hid."""
        if change.reset:
            self._messages.clear()
            self._tokens.clear()
            self._anchors.clear()
            self._total = 0
            self._visible = []
            self._carried = _NO_SUMS
        if change.reset or not self._tokens:
            opening = fold.opening_row()
            if opening is not None:
                self._carried = carried_calibration(opening.meta)
        for row in change.visible:
            messages = row_messages(row, mode_active=self._mode_active)
            tokens = messages_tokens(self._encoding, messages, profile=self._profile)
            self._messages[row.seq] = messages
            self._tokens[row.seq] = tokens
            self._total += tokens
            if self._visible is not None:
                self._visible.extend(messages)
            if row.role == "assistant" and "usage" in row.meta:
                anchor = Anchor.from_meta(row.meta)
                # A figure far from the profile's count of its own request (a placeholder,
                # another request's usage) would hold every later count below the request.
                if anchor is not None and _ctxbudget.anchor_plausible(
                    anchor.reported, anchor.profile
                ):
                    self._anchors[row.seq] = anchor
        if change.retracts:
            for seq in [s for s in self._tokens if fold.is_retracted(s)]:
                self._total -= self._tokens.pop(seq)
                del self._messages[seq]
                self._anchors.pop(seq, None)
                self._visible = None

    @property
    def anchored(self) -> bool:
        """Whether a visible reply of the window records an anchor."""
        return bool(self._anchors)

    def latest_anchor(self) -> Anchor | None:
        """The anchor of the window's latest visible reply that records one."""
        return self._anchors[next(reversed(self._anchors))] if self._anchors else None

    def calibration(self) -> Sums:
        """The calibration sums (:data:`CALIBRATION_KEYS`) over the conversation's
        anchored requests: those the window's boundary carried in, plus its visible
        replies' — each request, each step between consecutive requests of one prefix
        (the same fingerprint, more rows, nothing shrunk), and each prefix's head (its
        first request, weighted by the core)."""
        key = (len(self._anchors), next(reversed(self._anchors), 0), self._carried)
        if self._calibration is not None and self._calibration[0] == key:
            return self._calibration[1]
        r, e, sr, se, hr, hm, ho = self._carried
        previous: Anchor | None = None
        for a in self._anchors.values():
            if a.reported and a.profile:
                r, e = r + a.reported, e + a.profile
                if previous is None or previous.fingerprint != a.fingerprint:
                    dr, dm, do = _ctxbudget.calibration_head(a.reported, a.profile, a.overhead)
                    hr, hm, ho = hr + dr, hm + dm, ho + do
                elif (
                    a.rows > previous.rows
                    and a.reported > previous.reported
                    and a.profile > previous.profile
                ):
                    sr += a.reported - previous.reported
                    se += a.profile - previous.profile
                previous = a
        sums = (r, e, sr, se, hr, hm, ho)
        self._calibration = (key, sums)
        return sums

    @property
    def rows(self) -> int:
        """Visible rows of the window (those a request carries)."""
        return len(self._tokens)

    def since(self, anchor: Anchor) -> int | None:
        """Tokens of the visible rows appended after ``anchor``'s request, or ``None``
        when the request's prefix is no longer what was sent (a row it carried was
        retracted or fell below a floor)."""
        after = tokens = 0
        for seq in reversed(self._tokens):
            if seq <= anchor.last_seq:
                break
            after += 1
            tokens += self._tokens[seq]
        if len(self._tokens) - after != anchor.rows:
            return None
        return tokens

    @property
    def tokens(self) -> int:
        """Tokens of the visible messages, framing included."""
        return self._total

    def messages(self) -> list[dict[str, Any]]:
        """The visible messages (a fresh list; rebuilt only after a retraction)."""
        if self._visible is None:
            self._visible = [m for ms in self._messages.values() for m in ms]
        return list(self._visible)


class _Owner(Protocol):
    """What a request is assembled from (the host's settings of the decision)."""

    @property
    def model(self) -> str: ...
    @property
    def mode_active(self) -> bool: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def prompts(self) -> Prompts: ...


class Prefix(NamedTuple):
    """What a request sends besides the window's messages, and what binds a reported
    figure to it (a tuple: read on every step, built when it changed)."""

    system: str
    """The system text as sent (context-only hooks included)."""
    overhead: int
    """Tokens of the request frame, the system text and every advertised tool."""
    fingerprint: str
    """:meth:`Requests.fingerprint`."""
    messages_fp: str
    """:meth:`Requests.messages_fp`."""


class Requests:
    """Assembles and counts the session's requests (the only formula)."""

    __slots__ = (
        "_advertised",
        "_base",
        "_capabilities",
        "_encoding",
        "_fingerprint",
        "_fixed",
        "_host_tools",
        "_messages_fp",
        "_offered",
        "_own_tools",
        "_prefix",
        "_profile",
        "_tools_version",
    )

    def __init__(
        self,
        encoding: Encoding,
        capabilities: Capabilities,
        host_tools: Sequence[Mapping[str, Any]],
        own_tools: Sequence[Mapping[str, Any]],
        *,
        profile: RequestProfile = "openai_chat",
    ) -> None:
        self._encoding = encoding
        self._profile: RequestProfile = profile
        self._capabilities = capabilities
        self._host_tools = [dict(t) for t in host_tools]
        self._own_tools = [dict(t) for t in own_tools]
        self._offered = list(self._own_tools)  # those of ctxbudget's tools requests offer
        self._advertised = [*self._host_tools, *self._offered]
        # Bumped whenever the advertised tools change, so the cached overhead is recounted.
        self._tools_version = 0
        self._fixed: tuple[tuple[str, int], int] | None = None
        self._fingerprint: tuple[tuple[str, str, int], str] | None = None
        self._messages_fp: tuple[tuple[str, str, bool], str] | None = None
        self._prefix: tuple[tuple[object, ...], Prefix] | None = None
        self._base: tuple[tuple[str, str | None, str, int], str] | None = None

    # ----- the parts ------------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """Every tool a request advertises: the host's, then ctxbudget's (fresh copies,
        since callers may edit them)."""
        return list(map(dict, self._advertised))

    def own_tools(self) -> list[dict[str, Any]]:
        """ctxbudget's tools (fresh copies)."""
        return [dict(t) for t in self._own_tools]

    def host_tools(self) -> list[dict[str, Any]]:
        """The host's tools (fresh copies)."""
        return [dict(t) for t in self._host_tools]

    def set_host_tools(self, tools: Sequence[Mapping[str, Any]]) -> bool:
        """Replaces the host's tools (already normalized and checked); ``True`` if they
        changed."""
        new = [dict(t) for t in tools]
        if new == self._host_tools:
            return False
        self._host_tools = new
        self._advertised = [*new, *self._offered]
        self._tools_version += 1
        return True

    def set_offered(self, names: Collection[str]) -> bool:
        """Offers only ctxbudget's tools named in ``names`` (checked); ``True`` if that
        changed."""
        offered = [t for t in self._own_tools if t["name"] in names]
        if offered == self._offered:
            return False
        self._offered = offered
        self._advertised = [*self._host_tools, *offered]
        self._tools_version += 1
        return True

    def system(
        self, owner: _Owner, fold: WindowFold, hooks: Sequence[RequestHook] | None = None
    ) -> str:
        """The system text: the host's, ctxbudget's window addition (rendered once per
        window), then what context-only hooks add."""
        base = self._base_system(owner, fold)
        extra = [str(h.fn(fold.window_id)) for h in (hooks or ()) if h.context_only]
        return "\n\n".join([base, *extra]) if extra else base

    def prefix(
        self, owner: _Owner, fold: WindowFold, hooks: Sequence[RequestHook] | None = None
    ) -> Prefix:
        """The system text, the overhead and both fingerprints of the request the
        session would send now (kept while nothing they depend on changes: one
        comparison per step)."""
        window_id = fold.window_id
        model, mode = owner.model, owner.mode_active
        system = None
        key: tuple[object, ...]
        if hooks and any(h.context_only for h in hooks):
            # What the hooks add is known only by calling them.
            system = self.system(owner, fold, hooks)
            key = (window_id, system, model, mode, self._tools_version)
        else:
            # The window fixes the window before it (a window's id is its boundary's
            # seq), so the previous window's id, which the system text names, is no key.
            key = (
                window_id,
                owner.system_prompt,
                id(owner.prompts),
                model,
                mode,
                self._tools_version,
            )
        cached = self._prefix
        if cached is not None and cached[0] == key:
            return cached[1]
        if system is None:
            system = self.system(owner, fold, hooks)
        prefix = Prefix(
            system,
            self.overhead(system),
            self.fingerprint(system, window_id, model),
            self.messages_fp(window_id, model, mode),
        )
        self._prefix = (key, prefix)
        return prefix

    def _base_system(self, owner: _Owner, fold: WindowFold) -> str:
        if not owner.mode_active:
            return owner.system_prompt
        key = (fold.window_id, fold.previous_window_id, owner.system_prompt, id(owner.prompts))
        if self._base is not None and self._base[0] == key:
            return self._base[1]
        addition = owner.prompts.render(
            "system",
            self._capabilities,
            PromptContext(window_id=fold.window_id, previous_window_id=fold.previous_window_id),
        )
        text = f"{owner.system_prompt}\n\n{addition}" if owner.system_prompt else addition
        self._base = (key, text)
        return text

    # ----- counting -------------------------------------------------------------------

    def count(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
    ) -> int:
        """Tokens of a request by the session's request profile (SPEC §1, Request
        counting)."""
        return request_tokens(self._encoding, system, messages, tools, profile=self._profile)

    def overhead(self, system: str) -> int:
        """Tokens of the request frame, the system text and every advertised tool schema
        (cached while they do not change)."""
        key = (system, self._tools_version)
        if self._fixed is not None and self._fixed[0] == key:
            return self._fixed[1]
        total = request_tokens(self._encoding, system, (), self.tools(), profile=self._profile)
        self._fixed = (key, total)
        return total

    def fingerprint(self, system: str, window_id: str, model: str) -> str:
        """What binds a reported figure to the prefix of the request it answered: the
        window, the model, the system text as sent (context-only hooks included) and
        every advertised tool (cached while they do not change). Deterministic, so
        every host computes the same one for the same request."""
        key = (system, window_id, self._tools_version)
        if self._fingerprint is not None and self._fingerprint[0] == key:
            return self._fingerprint[1]
        text = json.dumps(
            [window_id, model, self._encoding.name, system, self.tools()],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        fp = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
        self._fingerprint = (key, fp)
        return fp

    def messages_fp(self, window_id: str, model: str, mode_active: bool) -> str:
        """What fixes how the window's messages are rendered and counted: the window,
        the model, the encoding, the request profile and whether user messages carry
        their item IDs (cached). Two requests of one window with the same messages and
        the same one differ in their system text and tools only (a reported figure
        then still holds for the messages; ``ctxbudget::anchor::CountSplit::rebased``)."""
        key = (window_id, model, mode_active)
        if self._messages_fp is not None and self._messages_fp[0] == key:
            return self._messages_fp[1]
        text = json.dumps(
            [window_id, model, self._encoding.name, self._profile, mode_active],
            ensure_ascii=False,
        )
        fp = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
        self._messages_fp = (key, fp)
        return fp

    def assemble(
        self, owner: _Owner, fold: WindowFold, window: WindowTokens, hooks: Sequence[RequestHook]
    ) -> dict[str, Any]:
        """The request as sent: assembled, then passed through the unrestricted hooks
        (each gets copies, so editing in place cannot reach the session's caches)."""
        request: dict[str, Any] = {
            "system": self.system(owner, fold, hooks),
            "messages": window.messages(),
            "tools": self.tools(),
        }
        for hook in hooks:
            if not hook.context_only:
                request = hook.fn(
                    {
                        "system": request["system"],
                        "messages": [dict(m) for m in request["messages"]],
                        "tools": [dict(t) for t in request["tools"]],
                    }
                )
        return request
