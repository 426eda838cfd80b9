"""The ``session_history`` tool: the agent's bounded way back into earlier windows.

The scanning, budgets, privacy floor and cursors run in the Rust core under the history
lock; this module adds the tool's schema for each provider and the Python call surface.
Results are plain JSON objects (dicts), at most 16 KiB serialized, whatever the input.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import _ctxbudget
from ._shared import strict_parameters, tool_definition
from .history import History

__all__ = ["NOTICE", "SessionHistoryTool"]

NOTICE: str = _ctxbudget.NOTICE
"""Marks every result as data, not instructions (the core's text)."""

# The description, the argument schema and its limits are the core's, so they are the
# same for Rust hosts and cannot drift from what the tool checks.
_DESCRIPTION: str = _ctxbudget.SESSION_HISTORY_DESCRIPTION
_NOT_STRICT: tuple[str, ...] = tuple(_ctxbudget.SESSION_HISTORY_NOT_STRICT)
_PARAMETERS: dict[str, Any] = _ctxbudget.session_history_parameters()


@dataclass(frozen=True, slots=True)
class _Refusal:
    """A call refused before it reaches the core; its result is shaped like the core's."""

    code: str
    error: str

    @property
    def text(self) -> str:
        return json.dumps(
            {
                "ok": False,
                "code": self.code,
                "error": self.error,
                "notice": NOTICE,
                "has_more": False,
            }
        )


def _encode(args: object) -> str:
    """Arguments as JSON text; ``"null"`` (reported as invalid_arguments by the core) for
    anything that is not a JSON value: NaN, non-string keys, cycles, odd objects."""
    try:
        return json.dumps(args, allow_nan=False)
    except Exception:  # every input must become a result, never an exception
        return "null"


def _json_schema() -> dict[str, Any]:
    return copy.deepcopy(_PARAMETERS)


def _strict_schema() -> dict[str, Any]:
    return strict_parameters(_json_schema(), required="action", drop=_NOT_STRICT)


class SessionHistoryTool:
    """``session_history`` scoped to one workspace's :class:`~ctxbudget.History`.

    ``call`` never raises for bad arguments: it returns ``{"ok": False, "code": …}``.
    ``allowed=False`` (tool policy denies it) makes every call ``not_allowed``.
    """

    name = "session_history"

    __slots__ = ("_allowed", "_core", "_history")

    def __init__(
        self, history: History, *, allowed: bool = True, deadline_seconds: float = 30.0
    ) -> None:
        if not isinstance(history, History):
            raise TypeError(f"history must be a ctxbudget.History, got {type(history).__name__}")
        if not deadline_seconds >= 0:
            raise ValueError(f"deadline_seconds must be >= 0, got {deadline_seconds!r}")
        self._history = history
        self._allowed = bool(allowed)
        self._core = _ctxbudget.SessionHistoryTool(
            history._core, deadline_seconds=float(deadline_seconds)
        )

    @property
    def description(self) -> str:
        """What the tool does, as the model reads it."""
        return _DESCRIPTION

    def schema(self, flavor: str = "json") -> dict[str, Any]:
        """The tool definition: ``"json"`` (plain JSON Schema of the arguments),
        ``"openai"`` (Chat Completions, strict), ``"openai_responses"`` (Responses API,
        strict) or ``"anthropic"`` (Messages API)."""
        return tool_definition(flavor, self.name, _DESCRIPTION, _json_schema(), _strict_schema())

    def call_json(self, args_json: str) -> str:
        """One call with raw tool-call JSON; returns the JSON result text. Never raises:
        any input (not text, not JSON, lone surrogates) is a result with ``ok: false``."""
        checked = self._checked(args_json)
        if isinstance(checked, _Refusal):
            return checked.text
        return self._core.call_json(checked)

    def _checked(self, args: object) -> str | _Refusal:
        """The arguments as JSON text the core takes, or the refusal to return."""
        if not self._allowed:
            return _Refusal("not_allowed", "session_history is not allowed by the tool policy")
        if not isinstance(args, str):
            if not isinstance(args, Mapping):
                return _Refusal(
                    "invalid_arguments",
                    f"arguments must be JSON text or an object, not {type(args).__name__}",
                )
            return self._checked(_encode(args))
        try:
            args.encode("utf-8")
        except UnicodeEncodeError as e:
            return _Refusal(
                "invalid_arguments",
                f"arguments are not valid Unicode (a lone surrogate at character {e.start}); "
                "send UTF-8 text",
            )
        return args

    def call(self, args: Mapping[str, Any] | str) -> dict[str, Any]:
        """One call with parsed arguments (or raw JSON text); returns the result dict,
        built by the core directly. Never raises: arguments that are not JSON values give
        ``invalid_arguments``."""
        # A mapping goes to the core as it is (encoded there, as json.dumps would);
        # text and anything else pass the same checks as call_json.
        checked = args if self._allowed and isinstance(args, Mapping) else self._checked(args)
        if isinstance(checked, _Refusal):
            result: dict[str, Any] = json.loads(checked.text)
            return result
        return self._core.call(checked)

    def __repr__(self) -> str:
        return f"SessionHistoryTool({self._history!r})"
