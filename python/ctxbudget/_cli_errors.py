"""One-line, actionable messages for filesystem errors met by the command line."""

from __future__ import annotations

import errno
import os

__all__ = ["describe_os_error"]

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
