"""Exact token counting: the typed API over the Rust core.

Counts equal ``len(tiktoken.get_encoding(name).encode_ordinary(text))`` for every
text, in linear time (a megabyte of spaces or a base64 blob included), and
:attr:`TokenCount.exact` is true unless the encoding is a stated estimate for another
model. Counting releases the GIL; :meth:`Encoding.count_many` uses every core.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _ctxbudget
from ._messages import as_message
from .errors import InvalidJsonError
from .media import ImageProvider, image_rule_for, part_image_tokens

__all__ = [
    "BOUNDARY_SLACK",
    "DEFAULT_CACHE_SIZE",
    "FRAMING_TOKENS",
    "OTHER_MEDIA_TOKENS",
    "PDF_PAGE_TOKENS",
    "Encoding",
    "TokenCount",
    "count_messages",
    "count_tokens",
    "encoding_for_model",
    "encoding_names",
    "messages_tokens",
    "request_tokens",
]

BOUNDARY_SLACK: int = _ctxbudget.BOUNDARY_SLACK
"""Tokens once added per forced cut; counting no longer cuts by force, so never added."""

DEFAULT_CACHE_SIZE: int = _ctxbudget.DEFAULT_CACHE_SIZE
"""Counts an :class:`Encoding` remembers by content hash unless told otherwise."""

# The request allowances are the core's (``ctxbudget::tokens::request``), read once.
FRAMING_TOKENS: int = _ctxbudget.FRAMING_TOKENS
"""Tokens per message and per advertised tool schema (plus 1 per request)."""

OTHER_MEDIA_TOKENS: int = _ctxbudget.OTHER_MEDIA_TOKENS
"""Allowance for a media part that is neither an image (counted by the provider's rule,
:mod:`ctxbudget.media`) nor a paged document (audio, a file of unknown kind)."""

PDF_PAGE_TOKENS: int = _ctxbudget.PDF_PAGE_TOKENS
"""Allowance per page of a document part (at most :data:`_PDF_MAX_PAGES` pages)."""

_PDF_MAX_PAGES: int = _ctxbudget.PDF_MAX_PAGES
_REQUEST_TOKENS: int = _ctxbudget.REQUEST_TOKENS
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_IMAGE_PARTS = frozenset({"image", "image_url", "input_image"})
_DOCUMENT_PARTS = frozenset({"media", "document", "file", "input_file"})


@dataclass(frozen=True, slots=True)
class TokenCount:
    """The result of counting one text."""

    tokens: int
    """Number of tokens; an estimate when ``exact`` is false."""
    exact: bool
    """True when ``tokens`` equals tiktoken's count (false only for estimates)."""
    forced_cuts: int
    """Cuts made where no exact pre-token boundary existed: always 0."""


class Encoding:
    """A tokenizer for one encoding, e.g. ``Encoding("o200k_base")``.

    Raises :class:`~ctxbudget.UnknownEncodingError` for a name ctxbudget does not ship
    (see :func:`encoding_names`). Counts of texts of 64 bytes or more are cached by
    content hash (``cache_size`` entries, 0 to disable), so recounting an unchanged
    message is a lookup.
    """

    __slots__ = ("_core",)

    def __init__(self, name: str, *, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        if not isinstance(name, str):
            raise TypeError(f"encoding name must be str, got {type(name).__name__}")
        self._core = _ctxbudget.Encoding(name, cache_size=_check_cache_size(cache_size))

    @classmethod
    def for_model(cls, model: str, *, cache_size: int = DEFAULT_CACHE_SIZE) -> Encoding:
        """The encoding that counts tokens for ``model``.

        Follows tiktoken's model table (exact names, then prefixes; ``ft:`` fine-tunes
        count like their base model). Families without a public tokenizer (``claude-*``,
        ``gemini-*``) get a stated estimate: see :attr:`estimate_scale`. Anything else
        raises :class:`~ctxbudget.UnknownModelError`.
        """
        if not isinstance(model, str):
            raise TypeError(f"model must be str, got {type(model).__name__}")
        enc = cls.__new__(cls)
        enc._core = _ctxbudget.Encoding.for_model(model, cache_size=_check_cache_size(cache_size))
        return enc

    @property
    def name(self) -> str:
        """The encoding's name, e.g. ``"o200k_base"``."""
        return self._core.name

    @property
    def estimate_scale(self) -> float | None:
        """``None`` for a real tokenizer; else the factor applied to estimate another
        model's count (rounded up), e.g. ``1.3``."""
        bp = self._core.estimate_scale_bp
        return None if bp is None else bp / 10_000

    @property
    def is_estimate(self) -> bool:
        """True when counts estimate a model whose tokenizer is not public."""
        return self._core.estimate_scale_bp is not None

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return self._core.count(text)

    def count_detail(self, text: str) -> TokenCount:
        """Tokens in ``text``, whether the count is exact, and the forced cuts it needed."""
        tokens, exact, forced_cuts = self._core.count_detail(text)
        return TokenCount(tokens=tokens, exact=exact, forced_cuts=forced_cuts)

    def count_many(self, texts: Iterable[str]) -> list[int]:
        """Counts of many texts, in order, spread over all cores."""
        if isinstance(texts, str):
            raise TypeError("count_many() expects an iterable of str, not a single str")
        seq = texts if isinstance(texts, (list, tuple)) else list(texts)
        return self._core.count_many(seq)

    def count_json(self, value: object) -> int:
        """Tokens of a JSON document: its string contents, plus one token per byte of
        punctuation, numbers and escape expansion, and never less than the count of the
        serialized text.

        ``value`` is JSON text (``str``/``bytes``) or a JSON-able Python value, which is
        serialized compactly (``ensure_ascii=False``) first.
        """
        if isinstance(value, (bytes, bytearray)):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidJsonError(
                    f"JSON bytes are not UTF-8 at byte offset {exc.start}; pass UTF-8 JSON"
                ) from exc
        if not isinstance(value, str):
            try:
                value = json.dumps(
                    value, ensure_ascii=False, separators=(",", ":"), allow_nan=False
                )
            except (TypeError, ValueError) as exc:
                raise InvalidJsonError(f"value cannot be serialized as JSON: {exc}") from exc
            except RecursionError:
                # json.dumps recurses per level; the core refuses such depths anyway.
                raise InvalidJsonError(
                    "value nests too deeply to be counted as JSON; flatten it"
                ) from None
        assert isinstance(value, str)
        return self._core.count_json(value)

    def cache_len(self) -> int:
        """Number of counts currently cached."""
        return self._core.cache_len()

    def clear_cache(self) -> None:
        """Forget every cached count."""
        self._core.clear_cache()

    def __repr__(self) -> str:
        if self.is_estimate:
            return f"Encoding({self.name!r}, estimate_scale={self.estimate_scale})"
        return f"Encoding({self.name!r})"


def _check_cache_size(cache_size: int) -> int:
    if isinstance(cache_size, bool) or not isinstance(cache_size, int):
        raise TypeError(f"cache_size must be int, got {type(cache_size).__name__}")
    if cache_size < 0:
        raise ValueError(f"cache_size must be >= 0 (0 disables the cache), got {cache_size}")
    return cache_size


def encoding_names() -> tuple[str, ...]:
    """Names of every encoding ctxbudget ships."""
    return tuple(_ctxbudget.encoding_names())


def encoding_for_model(model: str) -> Encoding:
    """The :class:`Encoding` for ``model``; see :meth:`Encoding.for_model`."""
    return Encoding.for_model(model)


@functools.lru_cache(maxsize=64)
def _shared(kind: str, value: str) -> Encoding:
    return Encoding.for_model(value) if kind == "model" else Encoding(value)


def count_tokens(text: str, *, model: str | None = None, encoding: str | None = None) -> int:
    """Tokens of ``text`` for ``model`` or for ``encoding`` (exactly one of them).

    Encodings are shared between calls, so repeated calls reuse one cache.
    """
    if (model is None) == (encoding is None):
        raise ValueError(
            "count_tokens() needs exactly one of model= or encoding=, "
            "e.g. count_tokens(text, encoding='o200k_base')"
        )
    if model is not None:
        return _shared("model", model).count(text)
    assert encoding is not None
    return _shared("encoding", encoding).count(text)


def _resolve(model: str | None, encoding: str | Encoding | None) -> Encoding:
    if (model is None) == (encoding is None):
        raise ValueError(
            "count_messages() needs exactly one of model= or encoding=, "
            "e.g. count_messages(messages, encoding='o200k_base')"
        )
    if isinstance(encoding, Encoding):
        return encoding
    if encoding is not None:
        return _shared("encoding", encoding)
    assert model is not None
    return _shared("model", model)


def _media_tokens(part: Mapping[str, Any]) -> int:
    pages = part.get("pages")
    if isinstance(pages, int) and not isinstance(pages, bool):
        return min(max(pages, 0), _PDF_MAX_PAGES) * PDF_PAGE_TOKENS
    return OTHER_MEDIA_TOKENS


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _collect(message: Mapping[str, Any], texts: list[str], images: ImageProvider) -> int:
    """Appends the texts of one message to ``texts``; returns its fixed allowances
    (images by ``images``' rule, unless a part is in Anthropic's shape)."""
    allowance = 0
    if "content" not in message and "tool_calls" not in message:
        # A Responses API item (function_call, function_call_output, reasoning, …):
        # counted as the JSON it is sent as.
        texts.append(_dumps(dict(message)))
        return allowance
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, Sequence):
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind in _IMAGE_PARTS or kind == "media":
                image = part_image_tokens(part, images)
                allowance += _media_tokens(part) if image is None else image
            elif kind in _DOCUMENT_PARTS:
                allowance += _media_tokens(part)
            else:
                texts.append(part if isinstance(part, str) else _dumps(part))
    elif content is not None:
        texts.append(_dumps(content))
    if message.get("tool_calls"):
        texts.append(_dumps(message["tool_calls"]))
    if message.get("reasoning"):
        # Reasoning items a Responses reply carried, sent back with the message.
        texts.append(_dumps(message["reasoning"]))
    for media in message.get("media") or ():
        image = part_image_tokens(media, images)
        allowance += _media_tokens(media) if image is None else image
    return allowance


def messages_tokens(
    encoding: Encoding,
    messages: Iterable[Mapping[str, Any]],
    *,
    images: ImageProvider = "openai",
) -> int:
    """Tokens of ``messages`` with their framing, without the request's 1 token: the
    rule :func:`count_messages` applies, for callers that sum requests piecewise.
    Images count by ``images``' rule (see :mod:`ctxbudget.media`)."""
    texts: list[str] = []
    total = 0
    for message in messages:
        total += FRAMING_TOKENS + _collect(message, texts, images)
    return total + sum(encoding.count_many(texts))


def request_tokens(
    encoding: Encoding,
    system: str | None,
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]] = (),
    *,
    images: ImageProvider = "openai",
) -> int:
    """Tokens of a request: 1, plus the system text as a message, every message and
    every tool schema with their framing (see :func:`count_messages`)."""
    total = _REQUEST_TOKENS + (FRAMING_TOKENS + encoding.count(system) if system else 0)
    for tool in tools:
        total += FRAMING_TOKENS + encoding.count_json(dict(tool))
    return total + messages_tokens(encoding, messages, images=images)


def count_messages(
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]] | None = None,
    *,
    model: str | None = None,
    encoding: str | Encoding | None = None,
) -> int:
    """Tokens of a whole request, counted the way :class:`~ctxbudget.Session` budgets
    it: :data:`FRAMING_TOKENS` per message and per tool schema, plus 1 per request.

    ``messages`` are what you send (a system message included): OpenAI Chat or
    Anthropic messages, Responses API input items, or ctxbudget's own — as dicts, OpenAI
    SDK objects, pydantic models or dataclasses of those shapes, or LangChain messages
    (anything else is a ``TypeError``). Text content and
    text parts count exactly; tool calls and any other part count as their JSON; images
    count by the provider's documented rule (:mod:`ctxbudget.media`: Anthropic's for
    Anthropic-shaped parts and Claude models, else OpenAI's tiles) and documents
    :data:`PDF_PAGE_TOKENS` per page (up to 100). Every tool schema in ``tools`` counts
    as its JSON. Give exactly one of ``model`` and ``encoding`` (a name or an
    :class:`Encoding`)::

        count_messages([{"role": "user", "content": "hi"}], encoding="o200k_base")
    """
    if isinstance(messages, Mapping):
        raise TypeError("count_messages() takes a list of messages; wrap a single one in a list")
    messages = [as_message(m) for m in messages]
    images = image_rule_for(model) if model is not None else "openai"
    return request_tokens(_resolve(model, encoding), None, messages, tools or (), images=images)
