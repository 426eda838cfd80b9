"""Exact token counting: the typed API over the Rust core.

Counts equal ``len(tiktoken.get_encoding(name).encode_ordinary(text))`` for every
text, in linear time (a megabyte of spaces or a base64 blob included) — and, for an
open-weight model's own tokenizer read from disk (:meth:`Encoding.from_dir`), its
original's count, with its chat template for whole requests — and
:attr:`TokenCount.exact` is true unless the encoding is a stated estimate for another
model. Counting releases the GIL; :meth:`Encoding.count_many` uses every core.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from . import _ctxbudget
from ._messages import as_message
from .errors import InvalidJsonError

__all__ = [
    "CALL_TOKENS",
    "DEFAULT_CACHE_SIZE",
    "FUNCTIONS_TOKENS",
    "FUNCTION_TOKENS",
    "MESSAGE_TOKENS",
    "NAME_TOKENS",
    "OTHER_MEDIA_TOKENS",
    "PROFILES",
    "REPLY_TOKENS",
    "Encoding",
    "RequestProfile",
    "TokenCount",
    "count_messages",
    "count_tokens",
    "encoding_for_model",
    "encoding_names",
    "messages_tokens",
    "profile_for",
    "render_tools",
    "request_tokens",
]

DEFAULT_CACHE_SIZE: int = _ctxbudget.DEFAULT_CACHE_SIZE
"""Counts an :class:`Encoding` remembers by content hash unless told otherwise."""

# The request rules and allowances are the core's (``ctxbudget::tokens::request``).
MESSAGE_TOKENS: int = _ctxbudget.MESSAGE_TOKENS
"""Tokens that frame every message besides its role: ``<|start|>``, ``<|message|>``,
``<|end|>`` (the OpenAI cookbook's 3 per message)."""

NAME_TOKENS: int = _ctxbudget.NAME_TOKENS
"""Tokens a message's ``name`` adds besides the name's own (the cookbook's 1)."""

REPLY_TOKENS: int = _ctxbudget.REPLY_TOKENS
"""Tokens that prime the reply, once per request (``<|start|>assistant<|message|>``)."""

FUNCTIONS_TOKENS: int = _ctxbudget.FUNCTIONS_TOKENS
"""Tokens the tools section adds besides its text, once per request with function tools
(with :data:`FUNCTION_TOKENS`, fitted to the cookbook's tool constants for gpt-4o)."""

FUNCTION_TOKENS: int = _ctxbudget.FUNCTION_TOKENS
"""Tokens each function tool adds besides its rendered text."""

CALL_TOKENS: int = _ctxbudget.CALL_TOKENS
"""Tokens that frame one tool call besides its function's name and arguments."""

OTHER_MEDIA_TOKENS: int = _ctxbudget.OTHER_MEDIA_TOKENS
"""Allowance for a media part that is neither an image (counted by the provider's rule,
:mod:`ctxbudget.media`) nor a paged document (audio, a file of unknown kind)."""

RequestProfile = Literal[
    "openai_chat",
    "openai_responses",
    "harmony",
    "anthropic_messages",
    "gemini",
    "chat_template",
    "mistral_v3",
    "mistral_v7",
]
"""How a provider renders a request, and so how it counts (SPEC §1, Request counting;
docs/concepts.md names each profile's sources):

- ``openai_chat``: the OpenAI cookbook's framing, function tools as the TypeScript
  namespace the model reads, a tool call as its name and arguments;
- ``openai_responses``: the same messages; ``function_call`` and
  ``function_call_output`` items each a message of their own (an assistant turn that
  only calls tools has no assistant message around its calls);
- ``harmony`` (gpt-oss): exactly the tokens ``openai-harmony`` renders;
- ``anthropic_messages``, ``gemini``: chat framing over a stated estimate, with their
  providers' image and PDF rules;
- ``chat_template`` (open-weight models): the model's own chat template rendered with
  the tools and the prompt for the reply, counted by its tokenizer (an
  :class:`Encoding` read with its template, :meth:`Encoding.from_dir`);
- ``mistral_v3`` (Mistral Nemo, Pixtral 12B, Mistral 7B v0.3, Mixtral 8x22B): exactly
  the tokens ``mistral-common``'s request encoder (instruct tokenizer v3) produces,
  counted by the model's tekken or SentencePiece v3 file;
- ``mistral_v7`` (Mistral Large 2411, Mistral Small 3 and the models whose files say
  v7): the same encoder at v7 — system messages in place between
  ``[SYSTEM_PROMPT]`` tokens, tool results with ``[TOOL_CONTENT]``.
"""

PROFILES: tuple[RequestProfile, ...] = cast(
    "tuple[RequestProfile, ...]", tuple(_ctxbudget.PROFILES)
)
"""Every request profile's name."""


def profile_for(model: str) -> RequestProfile:
    """The request profile ``model``'s requests count with: ``harmony`` for gpt-oss,
    ``anthropic_messages`` for Claude, ``gemini`` for Gemini (also behind provider
    prefixes such as ``openai/gpt-oss-120b``), else ``openai_chat``. A host on OpenAI's
    Responses API passes ``"openai_responses"`` itself."""
    return cast(RequestProfile, _ctxbudget.profile_for_model(model))


def _checked_profile(profile: str) -> RequestProfile:
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}; got {profile!r}")
    return profile  # narrowed to RequestProfile by the membership test


@dataclass(frozen=True, slots=True)
class TokenCount:
    """The result of counting one text."""

    tokens: int
    """Number of tokens; an estimate when ``exact`` is false."""
    exact: bool
    """True when ``tokens`` equals the tokenizer's own count (tiktoken's, or the
    original of a tokenizer file); false only for estimates."""


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
    def for_model(
        cls,
        model: str,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        tokenizers: str | os.PathLike[str] | None = None,
    ) -> Encoding:
        """The encoding that counts tokens for ``model``.

        With ``tokenizers`` (a directory of model directories on this machine: plain
        ``Llama-3.1-8B-Instruct/`` directories or a HuggingFace cache), the model's own
        tokenizer is read from the directory named like it (``ollama/llama3.1:8b``
        finds ``Llama-3.1-8B-Instruct``; see :meth:`from_dir`), or
        :class:`~ctxbudget.TokenizerError` says none matches. Otherwise follows
        tiktoken's model table (exact names, then prefixes; ``ft:`` fine-tunes count
        like their base model). Families without a public tokenizer (``claude-*``,
        ``gemini-*``) get a stated estimate: see :attr:`estimate_scale`. Anything else
        raises :class:`~ctxbudget.UnknownModelError`.
        """
        if not isinstance(model, str):
            raise TypeError(f"model must be str, got {type(model).__name__}")
        enc = cls.__new__(cls)
        size = _check_cache_size(cache_size)
        if tokenizers is not None:
            enc._core = _ctxbudget.Encoding.for_model_in(
                os.fspath(tokenizers), model, cache_size=size
            )
        else:
            enc._core = _ctxbudget.Encoding.for_model(model, cache_size=size)
        return enc

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> Encoding:
        """The tokenizer in a file on this machine: a HuggingFace ``tokenizer.json``
        (byte-level BPE: Llama 3, Qwen 2/3, DeepSeek, Phi-4…), a Mistral
        ``tekken*.json`` or a SentencePiece model (``tokenizer.model``: Llama 2,
        Gemma, Mistral v1–v3; BPE or Unigram).

        Counts equal the original's ``encode(text, add_special_tokens=False)``: added
        and special tokens written in the text count as one token each; a
        SentencePiece model's equal ``len(sentencepiece.encode(text))``. Nothing is
        downloaded; a file is read once per process. Raises
        :class:`~ctxbudget.TokenizerError` naming what the file lacks or what it uses
        that is not supported (a ``tokenizer.json`` conversion of a SentencePiece
        model, a WordPiece model).
        """
        enc = cls.__new__(cls)
        enc._core = _ctxbudget.Encoding.from_file(
            os.fspath(path), cache_size=_check_cache_size(cache_size)
        )
        return enc

    @classmethod
    def from_dir(
        cls, path: str | os.PathLike[str], *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> Encoding:
        """The tokenizer of a model directory as published (its SentencePiece
        ``tokenizer.model``, else its ``tokenizer.json`` or ``tekken.json``) with its
        chat template (``chat_template.jinja``, ``chat_template.json`` or
        ``tokenizer_config.json``): see :meth:`count_chat`."""
        enc = cls.__new__(cls)
        enc._core = _ctxbudget.Encoding.from_dir(
            os.fspath(path), cache_size=_check_cache_size(cache_size)
        )
        return enc

    @property
    def has_chat_template(self) -> bool:
        """True when the tokenizer came with a chat template (:meth:`from_dir`)."""
        return self._core.has_chat_template

    def render_chat(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        variables: Mapping[str, Any] | None = None,
    ) -> str:
        """The text the model's own chat template renders, as ``transformers``'
        ``apply_chat_template(messages, tools=tools, add_generation_prompt=…,
        tokenize=False)`` does; ``variables`` adds template variables (for example
        ``{"enable_thinking": False}``). Raises :class:`~ctxbudget.TokenizerError` when
        the template refuses the conversation (its ``raise_exception`` message)."""
        return self._core.render_chat(
            _listed(messages),
            None if tools is None else _listed(tools),
            add_generation_prompt,
            None if variables is None else dict(variables),
        )

    def count_chat(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        variables: Mapping[str, Any] | None = None,
    ) -> int:
        """Tokens of a request as an open-weight server sends it to the model: the
        chat template rendered with the prompt for the reply, then tokenized — the count
        of ``apply_chat_template(messages, tools=tools, add_generation_prompt=True,
        tokenize=True)`` (the ``chat_template`` counting profile)."""
        return self._core.count_chat(
            _listed(messages),
            None if tools is None else _listed(tools),
            None if variables is None else dict(variables),
        )

    @property
    def name(self) -> str:
        """The encoding's name, e.g. ``"o200k_base"`` (a file's stem or a model
        directory's name for :meth:`from_file` and :meth:`from_dir`)."""
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
        """Tokens in ``text`` and whether the count is exact (false only for estimates)."""
        tokens, exact = self._core.count_detail(text)
        return TokenCount(tokens=tokens, exact=exact)

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
        """Forget the counts of whole texts cached for this encoding (and its copies).

        The per-thread caches of pieces and segments are kept: they are exact, bounded
        and only make later counts faster.
        """
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


def messages_tokens(
    encoding: Encoding,
    messages: Iterable[Mapping[str, Any]],
    *,
    profile: RequestProfile = "openai_chat",
) -> int:
    """Tokens of ``messages`` with their framing by ``profile``, without the request's
    reply priming (nor, for ``harmony``, its system and developer messages): the rule
    :func:`count_messages` applies, for callers that sum requests piecewise."""
    return encoding._core.count_messages(_listed(messages), _checked_profile(profile))


def request_tokens(
    encoding: Encoding,
    system: str | None,
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]] = (),
    *,
    profile: RequestProfile = "openai_chat",
) -> int:
    """Tokens of a request by ``profile``: the reply priming, the system text as a
    system message, the advertised tools and every message (see
    :func:`count_messages`)."""
    return encoding._core.count_request(
        system or None, _listed(messages), _listed(tools), _checked_profile(profile)
    )


def render_tools(tools: Iterable[Mapping[str, Any]]) -> str:
    """The ``# Tools`` section the model reads for the function tools among ``tools``
    (definitions in any shape :func:`count_messages` takes; other tools are left out):
    the TypeScript namespace of OpenAI's harmony format, which the count of a request's
    tools is based on."""
    return _ctxbudget.render_tools(_listed(tools))


def _listed(items: Iterable[Mapping[str, Any]]) -> list[Any]:
    return items if isinstance(items, list) else list(items)


def count_messages(
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]] | None = None,
    *,
    model: str | None = None,
    encoding: str | Encoding | None = None,
    profile: RequestProfile | None = None,
) -> int:
    """Tokens of a whole request, counted the way :class:`~ctxbudget.Session` budgets
    it — the way the provider renders it (SPEC §1, Request counting), by ``profile``
    (default: the model's, :func:`profile_for`; ``openai_chat`` for an encoding). For
    ``openai_chat``, the way OpenAI's chat format renders it: each
    message framed by :data:`MESSAGE_TOKENS` plus its role (and :data:`NAME_TOKENS` plus
    the name for a ``name``), :data:`REPLY_TOKENS` per request, a tool call as its
    function's name and arguments (:data:`CALL_TOKENS` each), and the function tools in
    ``tools`` as the TypeScript namespace the model reads.

    ``messages`` are what you send (a system message included): OpenAI Chat or
    Anthropic messages, Responses API input items, or ctxbudget's own — as dicts, OpenAI
    SDK objects, pydantic models or dataclasses of those shapes, or LangChain messages
    (anything else is a ``TypeError``). Text counts exactly; images count by the
    provider's documented rule (:mod:`ctxbudget.media`: Anthropic's for Anthropic-shaped
    parts and Claude models, else OpenAI's tiles), PDF documents by the provider's
    per-page rule (:func:`ctxbudget.media.pdf_tokens`, up to 100 pages, read from inline
    data); parts of no known kind, and tools that are not functions, count as
    their JSON. Give exactly one of ``model`` and ``encoding`` (a name or an
    :class:`Encoding`)::

        count_messages([{"role": "user", "content": "hi"}], encoding="o200k_base")
    """
    if isinstance(messages, Mapping):
        raise TypeError("count_messages() takes a list of messages; wrap a single one in a list")
    messages = [as_message(m) for m in messages]
    if profile is None:
        profile = profile_for(model) if model is not None else "openai_chat"
    return request_tokens(_resolve(model, encoding), None, messages, tools or (), profile=profile)
