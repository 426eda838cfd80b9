"""A tool call the store could not serve, as a result (tool calls never raise).

The transcript or the memory files could not be read or written: the database is
unreachable or refused, another process holds the workspace's lock past its wait bound,
the transcript is damaged. ``session_history`` already answers these with
``history_unavailable`` (SPEC §6); every ctxbudget tool answers them the same way, so a
host hands the model a result, never an exception.
"""

from __future__ import annotations

from typing import Any

from ..errors import CtxBudgetError, DatabaseError, LockTimeoutError

__all__ = ["store_failure"]


def store_failure(exc: CtxBudgetError) -> dict[str, Any]:
    """``{"ok": False, "code": "history_unavailable", "error": …}`` for ``exc``.

    The message is the error's own, which never carries a password (the store redacts
    URLs in every message it makes); it says whether trying again may help.
    """
    transient = isinstance(exc, LockTimeoutError) or (
        isinstance(exc, DatabaseError) and bool(getattr(exc, "transient", False))
    )
    advice = (
        "try again in a moment"
        if transient
        else "continue without it; the host must fix the store before it can be used"
    )
    return {
        "ok": False,
        "code": "history_unavailable",
        "error": f"the session's store cannot be used right now ({exc}); {advice}",
    }
