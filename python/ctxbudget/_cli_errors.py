"""The command line's errors: one line on stderr, redacted, and the exit status
docs/cli.md promises — 2 for invalid arguments, 1 when the command could not do it.

:class:`UsageError` and :class:`CommandError` are raised by the commands;
:func:`exit_status` sorts ctxbudget's own errors the same way; :func:`describe_os_error`
words a filesystem error.
"""

from __future__ import annotations

import errno
import os
from typing import ClassVar

from ._redact import redact
from .errors import CtxBudgetError

__all__ = [
    "ARGUMENT_ERROR",
    "COMMAND_FAILED",
    "CliError",
    "CommandError",
    "UsageError",
    "describe_os_error",
    "exit_status",
]

ARGUMENT_ERROR = 2
"""Exit status for invalid arguments (and a ctxbudget error that says an argument is)."""
COMMAND_FAILED = 1
"""Exit status when the command could not do what was asked."""


class CliError(SystemExit):
    """A command stopped: ``str()`` is its one-line message (``PROG: …``, passwords and
    other secrets redacted), ``code`` its exit status. ``main`` prints the message; a
    ``SystemExit`` that escapes elsewhere still exits with the right status."""

    status: ClassVar[int]

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(self.status)
        self.message = redact(" ".join(f"{prog}: {message}".split()))

    def __str__(self) -> str:
        return self.message


class UsageError(CliError):
    """The arguments are invalid (a missing or conflicting option, a bad value): exit 2."""

    status = ARGUMENT_ERROR


class CommandError(CliError):
    """The arguments are valid but the command could not do it (a missing item, an
    empty or damaged transcript): exit 1."""

    status = COMMAND_FAILED


def exit_status(exc: CtxBudgetError) -> int:
    """2 for a ctxbudget error that says an argument is wrong (they are ``ValueError``s:
    an invalid argument or URL, an unknown model or encoding, bad settings) or that an
    optional extra is missing (``ImportError``: matplotlib for ``plot``); 1 for a
    failure while doing it (the database unreachable, a lock held too long, damage)."""
    return ARGUMENT_ERROR if isinstance(exc, (ValueError, ImportError)) else COMMAND_FAILED


_HINTS: dict[int, str] = {
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a directory: check the path",
    errno.EISDIR: "the path is a directory: give a file",
    errno.EACCES: "check the permissions of the path (or run as its owner)",
    errno.EPERM: "check the permissions of the path (or run as its owner)",
    errno.EROFS: "the filesystem is read-only: use a writable location",
    errno.ENOSPC: "the disk is full: free some space and retry",
    errno.EDQUOT: "the disk quota is exhausted: free some space and retry",
    errno.EEXIST: "something already exists there: move it or pick another path",
    errno.ENAMETOOLONG: "use a shorter path",
    errno.ELOOP: "the path has a symbolic-link loop: check the path",
    errno.EMFILE: "too many open files: close some or raise the limit (ulimit -n)",
}


def describe_os_error(exc: OSError, doing: str) -> str:
    """``cannot DOING: REASON (PATH); HINT`` for ``exc``, on one line.

    ``doing`` says what the command was doing, e.g. ``"open the transcript of ws"``.
    The reason is the operating system's text for the error number when there is one
    (otherwise the error's own message), the path the error names, and a hint by error
    number.
    """
    code = exc.errno if isinstance(exc.errno, int) else None
    message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else None
    reason = exc.strerror or message or (os.strerror(code) if code else None)
    reason = reason or type(exc).__name__
    where = os.fspath(exc.filename) if exc.filename is not None else None
    where_text = f" ({where})" if where is not None and str(where) not in reason else ""
    hint = _HINTS.get(code, "") if code else ""
    line = f"cannot {doing}: {reason}{where_text}" + (f"; {hint}" if hint else "")
    return " ".join(line.split())
