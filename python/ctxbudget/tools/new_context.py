"""The ``new_context`` tool (SPEC §7): the agent asks for a fresh window.

It takes no arguments and is honoured once per window. The persisted tool result is the
durable request: the window fold (:mod:`ctxbudget.window`) reads it from the transcript,
so a restart finds it, and :class:`~ctxbudget.Session` answers from the fold's state
(O(new rows) per call).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .. import _ctxbudget
from .._shared import tool_definition
from ..errors import CtxBudgetError
from ..history import History
from ..window import WindowFold
from .failure import store_failure

__all__ = ["NewContextTool"]

_DESCRIPTION = (
    "Start a fresh context window. Call it only after your checkpoint in "
    "/memories/session/ is saved and confirmed. Takes no arguments. The current step's "
    "other tools finish first; the next request starts in the new window, whose first "
    "message tells you where to find your checkpoint and earlier work."
)

_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _no_arguments(args: object) -> bool:
    """True for ``None``, ``{}``, ``""``, ``"null"`` and ``"{}"``."""
    if isinstance(args, str):
        text = args.strip()
        if text in ("", "null"):
            return True
        try:
            args = json.loads(text)
        except ValueError:
            return False
    return args is None or (isinstance(args, Mapping) and not args)


class NewContextTool:
    """``new_context`` for one workspace. ``offered=False`` answers every call with
    ``rollover_disabled`` (the policy of SPEC §4 decides whether it is offered)."""

    name = "new_context"

    __slots__ = ("_fold", "_history", "_offered", "_scheduled_window")

    def __init__(self, history: History | None = None, *, offered: bool = True) -> None:
        self._history = history
        self._offered = bool(offered)
        self._scheduled_window: str | None = None
        self._fold: WindowFold | None = None

    @staticmethod
    def requested_in(rows: Iterable[Any]) -> bool:
        """Whether ``rows`` (``Row`` objects or dicts, oldest first) leave a persisted
        ``scheduled`` result in their last window: the core window fold's rule, fed these
        rows."""
        fold = _ctxbudget.RowFold()
        fold.note(rows)
        return fold.new_context_requested

    @property
    def description(self) -> str:
        return _DESCRIPTION

    def schema(self, flavor: str = "json") -> dict[str, Any]:
        """``json``, ``openai``, ``openai_responses`` or ``anthropic`` tool definition."""
        return tool_definition(flavor, self.name, _DESCRIPTION, dict(_SCHEMA), dict(_SCHEMA))

    def call(
        self,
        args: Mapping[str, Any] | str | None = None,
        *,
        window_id: str | None = None,
        already_requested: bool | None = None,
    ) -> dict[str, Any]:
        """``{"ok": True, "status": "scheduled"}`` once per window; then
        ``already_requested``; ``rollover_disabled`` when not offered."""
        if not _no_arguments(args):
            return {
                "ok": False,
                "code": "invalid_arguments",
                "error": "new_context takes no arguments",
            }
        if not self._offered:
            return {
                "ok": False,
                "code": "rollover_disabled",
                "error": "new_context is not available now; continue the task",
            }
        window = window_id
        if window is None and self._history is not None:
            try:
                window = self._history.current_window
            except CtxBudgetError as exc:
                return store_failure(exc)
        if already_requested is None:
            already_requested = self._scheduled_window is not None and (
                self._scheduled_window == window
            )
            if not already_requested and self._history is not None:
                # A Session passes its fold's answer; a standalone tool keeps a fold.
                try:
                    if self._fold is None:
                        self._fold = WindowFold(self._history)
                    self._fold.advance()
                except CtxBudgetError as exc:
                    return store_failure(exc)
                already_requested = (
                    self._fold.window_id == window and self._fold.new_context_scheduled
                )
        if already_requested:
            return {
                "ok": False,
                "code": "already_requested",
                "error": "a new context window is already scheduled for this window",
            }
        self._scheduled_window = window
        return {"ok": True, "status": "scheduled"}
