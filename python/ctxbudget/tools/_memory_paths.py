"""What a memory path is, for both stores of the ``memory`` tool: the limits (the
core's constants), how a path is shown, and the refusal of a file that is too large."""

from __future__ import annotations

from .. import _ctxbudget
from .._confined import Refused

__all__ = [
    "CHECKPOINT_MAX",
    "FILE_MAX",
    "NAME_MAX",
    "PATH_MAX",
    "ROOT",
    "SESSION",
    "shown",
    "too_large",
]

CHECKPOINT_MAX: int = _ctxbudget.MEMORY_CHECKPOINT_MAX
"""Largest file in ``/memories/session/``, in bytes of UTF-8."""
FILE_MAX: int = _ctxbudget.MEMORY_FILE_MAX
"""Largest file elsewhere under ``/memories/``."""
NAME_MAX: int = _ctxbudget.MEMORY_NAME_MAX
"""Longest path component, in bytes of UTF-8."""
PATH_MAX: int = _ctxbudget.MEMORY_PATH_MAX
"""Longest path, in bytes of UTF-8."""
ROOT = "/memories"
SESSION = "session"


def shown(parts: list[str], n: int | None = None) -> str:
    """The virtual path of the first ``n`` components (all by default)."""
    chosen = parts if n is None else parts[:n]
    return "/".join([ROOT, *chosen])


def too_large(in_session: bool, size: int) -> Refused:
    limit = CHECKPOINT_MAX if in_session else FILE_MAX
    where = "a checkpoint file in /memories/session/" if in_session else "a memory file"
    return Refused(
        "too_large",
        f"{where} holds at most {limit:,} bytes; this would be {size:,}. "
        "Keep the checkpoint short: goal, decisions, progress, next steps, IDs.",
    )
