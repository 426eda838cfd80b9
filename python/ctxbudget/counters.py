"""Count endpoints as exact sources (SPEC §1, usage anchoring): a provider's own count
of a whole request, plugged in with ``Session.open(counter=...)``.

- :func:`anthropic_counter`: Anthropic's ``client.messages.count_tokens`` (an
  ``Anthropic`` or ``AsyncAnthropic`` client);
- :func:`gemini_counter`: Gemini's ``countTokens`` through the ``google-genai`` client
  (``client.models.count_tokens``, or ``client.aio.models.count_tokens`` for async).

Each returns a :class:`~ctxbudget.RequestCounter`; an async client gives an async
counter, which an :class:`~ctxbudget.AsyncSession` awaits (a plain ``Session`` needs a
synchronous client). No SDK is imported here: the client is used as given.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .session import CountRequest

__all__ = ["anthropic_counter", "gemini_contents", "gemini_counter"]


def anthropic_counter(client: Any, model: str | None = None) -> Callable[[CountRequest], Any]:
    """A counter calling ``client.messages.count_tokens(model=..., system=...,
    messages=..., tools=...)`` (``model`` defaults to the session's); the result's
    ``input_tokens`` is the count."""
    count = client.messages.count_tokens

    def arguments(request: CountRequest) -> dict[str, Any]:
        kwargs = {k: v for k, v in request.to_anthropic().items() if v}
        return {"model": model or request.model, **kwargs}

    if inspect.iscoroutinefunction(count):

        async def count_async(request: CountRequest) -> Any:
            return await count(**arguments(request))

        return count_async

    def count_sync(request: CountRequest) -> Any:
        return count(**arguments(request))

    return count_sync


def gemini_contents(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages as Gemini ``contents``: user text and tool results as the
    ``user`` role, the model's text and tool calls as ``model``."""
    contents: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        parts: list[dict[str, Any]] = []
        if role == "tool":
            parts.append(
                {
                    "function_response": {
                        "name": str(m.get("name") or ""),
                        "response": {"output": m.get("content")},
                    }
                }
            )
        else:
            if m.get("content"):
                parts.append({"text": str(m["content"])})
            for call in m.get("tool_calls") or ():
                args = call.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        args = {"arguments": args}
                parts.append({"function_call": {"name": call.get("name"), "args": args}})
        if parts:
            contents.append({"role": "model" if role == "assistant" else "user", "parts": parts})
    return contents


def gemini_counter(client: Any, model: str | None = None) -> Callable[[CountRequest], Any]:
    """A counter calling the ``google-genai`` client's ``models.count_tokens(model=...,
    contents=..., config={"system_instruction", "tools"})`` (``client.aio`` for an async
    one: pass ``client.aio``); the result's ``total_tokens`` is the count."""
    count = client.models.count_tokens

    def arguments(request: CountRequest) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if request.system:
            config["system_instruction"] = request.system
        functions = [
            {k: t[k] for k in ("name", "description", "parameters") if k in t}
            for t in request.tools
            if isinstance(t.get("name"), str)
        ]
        if functions:
            config["tools"] = [{"function_declarations": functions}]
        kwargs: dict[str, Any] = {
            "model": model or request.model,
            "contents": gemini_contents(request.messages),
        }
        if config:
            kwargs["config"] = config
        return kwargs

    if inspect.iscoroutinefunction(count):

        async def count_async(request: CountRequest) -> Any:
            return await count(**arguments(request))

        return count_async

    def count_sync(request: CountRequest) -> Any:
        return count(**arguments(request))

    return count_sync
