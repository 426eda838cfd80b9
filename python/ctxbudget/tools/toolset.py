"""The tools one session offers the model: which of them, their definitions, and the
dispatch of a call to the right one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import CtxBudgetError
from ..history import History
from ..prompts import Capabilities
from ..session_history import NOTICE, SessionHistoryTool
from .failure import store_failure
from .memory import MemoryTool
from .new_context import NewContextTool
from .policy import ToolPolicy

__all__ = ["OWN_TOOL_NAMES", "Toolset"]

OWN_TOOL_NAMES = ("session_history", "memory", "new_context")
"""ctxbudget's tool names (a host's tools must be named otherwise)."""


class Toolset:
    """``session_history``, ``memory`` and ``new_context`` for one session, as its tool
    policy and mode offer them (SPEC §4; fixed for the session)."""

    __slots__ = ("_definitions", "capabilities", "memory", "new_context", "session_history")

    def __init__(
        self,
        history: History,
        *,
        tool_policy: ToolPolicy,
        mode_active: bool,
        threshold: float,
        read_only: bool,
    ) -> None:
        offered = tool_policy.offers_new_context(mode_active=mode_active, threshold=threshold)
        self.capabilities = Capabilities(
            new_context=offered,
            history=tool_policy.allows("session_history"),
            memory_writable=tool_policy.allows("memory"),
        )
        self.session_history = SessionHistoryTool(history, allowed=self.capabilities.history)
        self.memory = MemoryTool(history, session_scope=mode_active, read_only=read_only)
        self.new_context = NewContextTool(history, offered=offered)
        tools: list[Any] = []
        if mode_active and self.capabilities.history:
            tools.append(self.session_history)
        if self.capabilities.memory_writable:
            tools.append(self.memory)
        if offered:
            tools.append(self.new_context)
        self._definitions = [
            {"name": t.name, "description": t.description, "parameters": t.schema("json")}
            for t in tools
        ]

    def definitions(self) -> list[dict[str, Any]]:
        """The offered tools as ``{"name", "description", "parameters"}`` (fresh copies)."""
        return [dict(d) for d in self._definitions]

    def run(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        window_state: Callable[[], tuple[str, bool]],
    ) -> dict[str, Any]:
        """Runs tool ``name`` and returns its JSON result; never raises, not for a bad
        call and not when the store fails (``history_unavailable``, as
        ``session_history`` answers it). ``window_state`` gives the current window's ID
        and whether it already holds a scheduled ``new_context`` result; it reads the
        store, so only ``new_context`` asks for it."""
        try:
            return self._dispatch(name, arguments if arguments is not None else {}, window_state)
        except CtxBudgetError as exc:
            result = store_failure(exc)
            if name == "session_history":  # shaped like the tool's own failures
                result.update(notice=NOTICE, has_more=False)
            return result

    def _dispatch(
        self,
        name: str,
        args: Mapping[str, Any] | str,
        window_state: Callable[[], tuple[str, bool]],
    ) -> dict[str, Any]:
        if name == "session_history":
            return self.session_history.call(args)
        if name == "memory":
            if not self.capabilities.memory_writable:
                return {"ok": False, "code": "not_allowed", "error": "memory is not allowed"}
            return self.memory.call(args)
        if name == "new_context":
            window_id, scheduled = window_state()
            return self.new_context.call(args, window_id=window_id, already_requested=scheduled)
        return {"ok": False, "code": "unknown_tool", "error": f"{name!r} is not a ctxbudget tool"}
