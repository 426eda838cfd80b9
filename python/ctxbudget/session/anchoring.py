"""How much of the next request's count is exact, anchored and estimated (SPEC §1,
usage anchoring): the session's side of the core's arithmetic (``ctxbudget::anchor``).

A reply recorded with usage carries the provider's figure (``meta.usage``) and what the
request it answered was (``meta.request``: the prefix fingerprint, the last seq read,
the visible rows and the profile's own count). While the next request keeps that
prefix, its count is the reported figure plus the profile's count of the rows appended
since; a changed fingerprint (another window, system text, tools, context-only hook
output or model) or a retracted row of the prefix drops the anchor. For families
without a public tokenizer the profile's counts are calibrated by the conversation's
reported ÷ estimated ratio, re-derived from the transcript (the window's replies and
what its boundary carried over). A host's count endpoint (:class:`RequestCounter`),
when plugged in, counts whole requests exactly; its results are cached per request.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from .. import _ctxbudget, providers
from ..policy import CountSplit
from ..usage import Usage
from .accounting import CALIBRATION_KEYS, Anchor, Sums, WindowTokens

if TYPE_CHECKING:
    from .state import Inputs, WindowState

__all__ = [
    "CountRequest",
    "Counting",
    "Measured",
    "PendingCount",
    "RequestCounter",
    "Sent",
    "measure",
]

_NO_SUMS: Sums = (0, 0, 0, 0, 0, 0, 0)
_NONE: tuple[None, int, None] = (None, 0, None)
_CACHE_SIZE = 16
"""Count-endpoint results kept per session (the requests of the last few steps)."""


@dataclass(frozen=True)
class CountRequest:
    """A whole request for a provider's count endpoint, in ctxbudget's neutral shape
    (the shape of :class:`~ctxbudget.Turn`); ``to_anthropic()`` and friends give the
    provider's keyword arguments."""

    model: str
    system: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)

    def to_anthropic(self) -> dict[str, Any]:
        """``system``, ``messages`` and ``tools`` for Anthropic (``messages.count_tokens``)."""
        return providers.to_anthropic(self.system, self.messages, self.tools)

    def to_openai_chat(self) -> dict[str, Any]:
        """``messages`` and ``tools`` for OpenAI Chat Completions."""
        return providers.to_openai_chat(self.system, self.messages, self.tools)

    def to_openai_responses(self) -> dict[str, Any]:
        """``instructions``, ``input`` and ``tools`` for the OpenAI Responses API."""
        return providers.to_openai_responses(self.system, self.messages, self.tools)


@runtime_checkable
class RequestCounter(Protocol):
    """A provider's count endpoint: the input tokens of a whole request (Anthropic's
    ``messages.count_tokens``, Gemini's ``countTokens``; see :mod:`ctxbudget.counters`).
    A plain :class:`~ctxbudget.Session` calls it on the calling thread; an
    :class:`~ctxbudget.AsyncSession` awaits it when it returns an awaitable, else runs
    it in a worker thread — never on the event loop. Whatever it raises (or a result
    that is not a non-negative int) falls back to the estimate, with the event
    ``count_endpoint_failed:<reason>``."""

    def __call__(self, request: CountRequest, /) -> Any: ...


@dataclass(frozen=True)
class PendingCount:
    """A request the session's count endpoint has not counted yet
    (:meth:`Session.pending_count`): count :attr:`request`, then hand the result to
    :meth:`Session.store_count`."""

    key: tuple[str, int, int]
    """What identifies the request (its prefix fingerprint, last seq and rows)."""
    request: CountRequest
    profile: tuple[int, int]
    """The profile's own count of the request and of its overhead."""


class Sent(NamedTuple):
    """The request :meth:`Session.prepare` last sent: the reply that answers it carries
    its size and what binds a reported figure to it (a tuple: built on every step)."""

    window: str
    tokens: int
    """The count the decision was made on."""
    profile: int
    """The profile's own count of the whole request (uncalibrated)."""
    overhead: int
    """The part of ``profile`` that is frame, system text and tools."""
    last_seq: int
    rows: int
    fingerprint: str | None
    """``None`` when an unrestricted hook could change anything: nothing anchors then."""
    messages_fp: str | None = None
    """What fixed how the messages were rendered (:meth:`Requests.messages_fp`)."""
    usage: Usage | None = None

    def meta(self, usage: Usage | None) -> dict[str, Any]:
        """The reply's metadata: ``request_tokens`` (the plot's figure), ``request``
        (the binding) and ``usage`` (the reported figure), as far as known."""
        meta: dict[str, Any] = {"request_tokens": self.tokens}
        if self.fingerprint is not None:
            meta["request"] = {
                "profile": self.profile,
                "overhead": self.overhead,
                "last_seq": self.last_seq,
                "rows": self.rows,
                "fp": self.fingerprint,
            }
            if self.messages_fp is not None:
                meta["request"]["messages_fp"] = self.messages_fp
        usage = usage if usage is not None else self.usage
        if usage is not None:
            meta["usage"] = usage.to_meta()
        return meta


class Measured(NamedTuple):
    """One measurement of the next request (a tuple: built on every step)."""

    request: dict[str, Any] | None
    """The request after unrestricted hooks (``None``: no such hook, built later)."""
    split: CountSplit
    """How much of the count is exact, anchored and estimated."""
    profile: int
    overhead: int
    fingerprint: str | None
    messages_fp: str | None = None
    system: str | None = None
    """The system text as sent when ``request`` is ``None`` (the request is then the
    window's messages, this text and the advertised tools)."""


_new_object = object.__new__
_new_tuple = tuple.__new__
_SET_SPLIT = tuple(
    CountSplit.__dict__[name].__set__ for name in ("exact", "anchored", "estimated", "margin")
)


def split_of(exact: int, anchored: int = 0, estimated: int = 0, margin: int = 0) -> CountSplit:
    """A :class:`CountSplit` built through its slots' setters (as ``Budget.evaluate``
    builds its ``Decision``): the per-step path, a third of the frozen ``__init__``."""
    c = _new_object(CountSplit)
    set_exact, set_anchored, set_estimated, set_margin = _SET_SPLIT
    set_exact(c, exact)
    set_anchored(c, anchored)
    set_estimated(c, estimated)
    set_margin(c, margin)
    return c


def _split(
    anchor: int | None,
    since: int,
    overhead: int,
    messages: int,
    estimated: bool,
    cal: Sums,
    overhead_was: int | None = None,
) -> CountSplit:
    """The core's split of the next request (``ctxbudget::anchor``), as :func:`split_of`
    builds it (inlined: the per-step path)."""
    exact, anchored, estimate, margin = _ctxbudget.count_split(
        anchor, since, overhead, messages, estimated, cal, overhead_was
    )
    c = _new_object(CountSplit)
    set_exact, set_anchored, set_estimated, set_margin = _SET_SPLIT
    set_exact(c, exact)
    set_anchored(c, anchored)
    set_estimated(c, estimate)
    set_margin(c, margin)
    return c


class Counting:
    """The session's anchors beyond the transcript (count-endpoint results, cached per
    request) and the events counting produced since the last turn."""

    __slots__ = ("_cache", "counter", "estimated", "events")

    def __init__(self, counter: RequestCounter | None, *, estimated: bool) -> None:
        self.counter = counter
        self.estimated = estimated
        """Whether the session's encoding estimates a family without a public tokenizer."""
        self._cache: OrderedDict[tuple[str, int, int], Anchor] = OrderedDict()
        self.events: list[str] = []

    @staticmethod
    def key(state: WindowState, fingerprint: str) -> tuple[str, int, int]:
        """What identifies the request the session would send now."""
        return (fingerprint, state.fold.last_seq, state.tokens.rows)

    def wanted(
        self, state: WindowState, inputs: Inputs
    ) -> tuple[tuple[str, int, int], CountRequest, tuple[int, int]] | None:
        """The request to count (its key, the request and its profile count) when a
        counter is plugged in and has not counted it yet."""
        hooks = inputs.hooks
        if self.counter is None or any(not h.context_only for h in hooks):
            return None
        requests, fold = state.requests, state.fold
        overhead, fp = requests.prefix(inputs, fold, hooks)[1:3]
        key = self.key(state, fp)
        if key in self._cache:
            return None
        request = requests.assemble(inputs, fold, state.tokens, hooks)
        counted = CountRequest(
            inputs.model, request["system"], request["messages"], request["tools"]
        )
        return key, counted, (overhead + state.tokens.tokens, overhead)

    def store(self, key: tuple[str, int, int], profile: tuple[int, int], result: object) -> None:
        """Keeps what the counter returned for ``key`` (or notes why it failed)."""
        if isinstance(result, BaseException):
            self.events.append(f"count_endpoint_failed:{type(result).__name__}")
            return
        tokens = _tokens_of(result)
        if tokens is None:
            self.events.append("count_endpoint_failed:result")
            return
        fp, last_seq, rows = key
        self._cache[key] = Anchor(tokens, profile[0], profile[1], last_seq, rows, fp)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    def call(self, state: WindowState, inputs: Inputs) -> None:
        """Counts the current request with the counter, on this thread (plain
        :class:`Session`); failures fall back with an event."""
        wanted = self.wanted(state, inputs)
        if wanted is not None:
            self.count(*wanted)

    def count(
        self, key: tuple[str, int, int], request: CountRequest, profile: tuple[int, int]
    ) -> None:
        """Counts ``request`` with the counter, on this thread, and keeps the result."""
        if self.counter is None:
            return
        try:
            result: object = self.counter(request)
        except Exception as exc:  # the host's endpoint: any failure falls back
            result = exc
        if inspect.isawaitable(result):
            # An async client's call: only an AsyncSession can await it.
            close = getattr(result, "close", None)
            if callable(close):
                close()
            result = TypeError("a plain Session needs a synchronous counter")
        self.store(key, profile, result)

    def measure(
        self, state: WindowState, inputs: Inputs, *, before_hooks: bool = False
    ) -> Measured:
        """The next request's count, split into its exact, anchored and estimated
        parts (``before_hooks``: of the request before unrestricted hooks). Calls no
        counter: results it already has count exactly."""
        fold, window, requests, hooks = state.fold, state.tokens, state.requests, inputs.hooks
        estimated = self.estimated
        cal = window.calibration() if estimated else _NO_SUMS
        if hooks and not before_hooks and any(not h.context_only for h in hooks):
            # An unrestricted hook could change anything: counted whole, never anchored.
            request = requests.assemble(inputs, fold, window, hooks)
            full = requests.count(request["system"], request["messages"], request["tools"])
            overhead = min(full, requests.overhead(request["system"]))
            split = _split(None, 0, overhead, full - overhead, estimated, cal)
            return Measured(request, split, full, overhead, None)
        system, overhead, fp, messages_fp = requests.prefix(inputs, fold, hooks)
        messages = window.tokens
        full = overhead + messages
        exact = self._cache.get(self.key(state, fp)) if self._cache else None
        if exact is not None:
            return Measured(None, split_of(exact.reported), full, overhead, fp, messages_fp, system)
        anchor, since, overhead_was = (
            self._anchor(window.latest_anchor(), fp, messages_fp, window)
            if window.anchored
            else _NONE
        )
        endpoint = self._latest_endpoint(fp) if self._cache else None
        if endpoint is not None and (anchor is None or endpoint.last_seq > anchor.last_seq):
            e_since = window.since(endpoint)
            if e_since is not None:
                # Counted exactly by the endpoint: exact, plus what was appended since.
                rest = _split(0, e_since, overhead, messages, estimated, cal)
                return Measured(
                    None,
                    split_of(rest.exact + endpoint.reported, 0, rest.estimated, rest.margin),
                    full,
                    overhead,
                    fp,
                    messages_fp,
                    system,
                )
        reported = anchor.reported if anchor is not None else None
        split = _split(reported, since, overhead, messages, estimated, cal, overhead_was)
        # Measured(...), built as a plain tuple: the per-step path (a NamedTuple's
        # __new__ is a Python function).
        return _new_tuple(Measured, (None, split, full, overhead, fp, messages_fp, system))

    def _anchor(
        self, anchor: Anchor | None, fp: str, messages_fp: str, window: WindowTokens
    ) -> tuple[Anchor | None, int, int | None]:
        """The anchor the next request keeps, the profile's count of what was appended
        since, and — when only its system text or tools changed since (an estimated
        family's figure still holds for the messages) — the anchored request's overhead
        (``ctxbudget::anchor::CountSplit::rebased``)."""
        if anchor is None:
            return _NONE
        overhead_was = None
        if anchor.fingerprint != fp:
            if not self.estimated or anchor.messages_fp != messages_fp:
                return _NONE
            overhead_was = anchor.overhead
        since = window.since(anchor)
        return _NONE if since is None else (anchor, since, overhead_was)

    def _latest_endpoint(self, fp: str) -> Anchor | None:
        for anchor in reversed(self._cache.values()):
            if anchor.fingerprint == fp:
                return anchor
        return None

    def fresh(self, state: WindowState, inputs: Inputs, profile: int) -> CountSplit:
        """The count of a fresh window's first request, counted ``profile`` by the
        profile: nothing anchors it; an estimate is calibrated."""
        estimated = self.estimated
        cal = state.tokens.calibration() if estimated else _NO_SUMS
        overhead = min(profile, state.requests.prefix(inputs, state.fold, inputs.hooks).overhead)
        return _split(None, 0, overhead, profile - overhead, estimated, cal)

    def drain(self) -> list[str]:
        """The events since the last call."""
        events, self.events = self.events, []
        return events


def _tokens_of(result: object) -> int | None:
    """A count endpoint's answer as tokens: an int, or a result object or dict with
    ``input_tokens`` (Anthropic) or ``total_tokens`` / ``totalTokens`` (Gemini)."""
    if isinstance(result, bool):
        return None
    if isinstance(result, int):
        return result if result >= 0 else None
    for key in ("input_tokens", "total_tokens", "totalTokens"):
        value = result.get(key) if isinstance(result, Mapping) else getattr(result, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def measure(state: WindowState, inputs: Inputs, *, before_hooks: bool = False) -> Measured:
    """The next request's count on ``state``, split (:meth:`Counting.measure`)."""
    return state.counting.measure(state, inputs, before_hooks=before_hooks)


def calibration_meta(state: WindowState) -> dict[str, dict[str, int]]:
    """The calibration sums a rollover's boundary carries into the next window (none
    for an exact family or a conversation without anchored requests)."""
    if not state.counting.estimated:
        return {}
    sums = state.tokens.calibration()
    if not sums[0] or not sums[1]:
        return {}
    return {"calibration": dict(zip(CALIBRATION_KEYS, sums, strict=True))}
