"""The session's value types: the turn it decides, hooks, constants."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import _ctxbudget, providers
from ..errors import InvalidArgumentError, UnknownModelError
from ..policy import CountSplit, Decision
from ..tokens import Encoding

__all__ = [
    "INTERRUPTED_OUTPUT",
    "RequestHook",
    "Turn",
    "context_window_for",
    "encoding_for",
]

INTERRUPTED_OUTPUT: dict[str, Any] = {
    "ok": False,
    "code": "interrupted",
    "error": "this tool call was interrupted: the process stopped before its result was "
    "recorded, so it may or may not have run; check its effects and call it again if it "
    "is still needed",
}
"""The result recorded for a tool call left open by a stopped process (see
:meth:`Session.interrupt_open_calls`)."""


def context_window_for(model: str) -> int:
    """The context window of ``model``, from the core's table of model families (each
    figure with its source): LiteLLM-style ``provider/model`` names, Bedrock IDs and
    Hugging Face repository names resolve too. Raises
    :class:`~ctxbudget.InvalidArgumentError` for an unknown model, and for one whose
    server decides its window (``ollama/…``: its ``num_ctx``), saying to pass
    ``context_window``. When the program uses LiteLLM (has imported it), LiteLLM's
    ``max_input_tokens`` for the model comes first (see
    :mod:`ctxbudget.integrations.litellm.models`)."""
    from ..integrations.litellm.models import litellm_window

    from_litellm = litellm_window(model)
    if from_litellm is not None:
        return from_litellm
    found = _ctxbudget.context_window(model)
    if isinstance(found, str):
        raise InvalidArgumentError(found)
    return found[0]


@functools.lru_cache(maxsize=64)
def _shared_encoding(name: str | None, model: str) -> Encoding:
    """One :class:`~ctxbudget.Encoding` per encoding name or model in a process, so that
    sessions share its count cache: the system text and tool schemas every session of a
    backend sends are counted once, not once per session opened."""
    return Encoding(name) if name is not None else Encoding.for_model(model)


@functools.lru_cache(maxsize=64)
def _shared_tokenizer(path: str, model: str) -> Encoding:
    """One :class:`~ctxbudget.Encoding` per tokenizer path (and model) in a process."""
    if os.path.isfile(path):
        return Encoding.from_file(path)
    if any(os.path.isfile(os.path.join(path, f)) for f in ("tokenizer.json", "tekken.json")):
        return Encoding.from_dir(path)
    return Encoding.for_model(model, tokenizers=path)


def encoding_for(
    model: str,
    encoding: str | Encoding | None,
    window: int,
    tokenizer: str | os.PathLike[str] | None = None,
) -> Encoding:
    """The :class:`~ctxbudget.Encoding` a session of ``model`` counts with: the one
    given (an instance as is; a name, shared by the process's sessions), else the
    tokenizer read from ``tokenizer`` (a file, a model directory, or a directory of
    model directories searched by the model's name), else the model's (shared too; a
    clear error for a model without a known tokenizer, naming the fix)."""
    if tokenizer is not None:
        if encoding is not None:
            raise InvalidArgumentError(
                "give encoding= or tokenizer=, not both: tokenizer= reads the model's own "
                "tokenizer files"
            )
        return _shared_tokenizer(os.fspath(tokenizer), model)
    if isinstance(encoding, Encoding):
        return encoding
    if encoding is not None:
        # Anything but a name goes to Encoding() as given, for its own clear error.
        return _shared_encoding(encoding, "") if isinstance(encoding, str) else Encoding(encoding)
    try:
        return _shared_encoding(None, model)
    except UnknownModelError as exc:
        from ..integrations.litellm.models import litellm_model

        routed = litellm_model(model)
        if routed is not None:
            try:
                return _shared_encoding(None, routed)
            except UnknownModelError:
                pass
        err = UnknownModelError(
            f"no tokenizer is known for model {model!r}; a local or custom model "
            f"needs its encoding, e.g. Session.open(..., model={model!r}, "
            f"encoding='o200k_base', context_window={window})"
        )
        err.model = model
        raise err from exc


@dataclass(frozen=True)
class RequestHook:
    """A host hook that edits requests (SPEC §2).

    A *context-only* hook is called as ``fn(window_id) -> str`` and may only add system
    text. An *unrestricted* hook is called as ``fn(request) -> request`` on
    ``{"system", "messages", "tools"}`` (copies: editing them in place is safe) and
    could change anything, tools included, so while one is registered a rollover
    pauses rather than seal a window with a changed toolset. The budget counts the
    request the hooks return.
    """

    fn: Callable[..., Any]
    context_only: bool


@dataclass(frozen=True)
class Turn:
    """What :meth:`Session.prepare` decided for the next provider request."""

    status: str
    """``send``, ``reject`` (input quarantined), ``block`` (Off at the limit) or
    ``pause`` (admission failed; the window stays open)."""
    decision: Decision
    window_id: str
    previous_window_id: str | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    system: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Every advertised tool: the host's (``Session.open(tools=...)``) and ctxbudget's."""
    events: list[str] = field(default_factory=list)
    """What this call did, e.g. ``advisory:handoff``, ``rollover:w:12``,
    ``interrupted:<call id>``, ``resync`` (another writer appended first)."""
    hooks: tuple[RequestHook, ...] = ()
    """The hooks captured for this turn (already applied; reuse the turn for retries)."""

    def to_openai_chat(self) -> dict[str, Any]:
        """``messages`` and ``tools`` for OpenAI Chat Completions (``**`` them in)."""
        return providers.to_openai_chat(self.system, self.messages, self.tools)

    def to_openai_responses(self) -> dict[str, Any]:
        """``instructions``, ``input`` and ``tools`` for the OpenAI Responses API."""
        return providers.to_openai_responses(self.system, self.messages, self.tools)

    def to_anthropic(self) -> dict[str, Any]:
        """``system``, ``messages`` and ``tools`` for Anthropic Messages."""
        return providers.to_anthropic(self.system, self.messages, self.tools)

    reason: str | None = None
    """Why the status is not ``send``."""

    @property
    def count(self) -> CountSplit:
        """How much of the request's count is exact, anchored and estimated (the
        decision's :attr:`~ctxbudget.Decision.count`)."""
        return self.decision.count
