"""ctxbudget's own tools, together: ``memory`` (:mod:`.memory`), ``new_context``
(:mod:`.new_context`), ``session_history`` (:class:`~ctxbudget.SessionHistoryTool`, over
the core's scanner), the tool policy that decides which are offered (:mod:`.policy`),
and the :class:`Toolset` a session offers the model."""

from __future__ import annotations

from ..session_history import SessionHistoryTool
from .memory import MemoryTool
from .new_context import NewContextTool
from .policy import RuleAction, ToolPolicy, ToolRule
from .toolset import OWN_TOOL_NAMES, Toolset

__all__ = [
    "OWN_TOOL_NAMES",
    "MemoryTool",
    "NewContextTool",
    "RuleAction",
    "SessionHistoryTool",
    "ToolPolicy",
    "ToolRule",
    "Toolset",
]
