"""Atomic file replacement that leaves nothing behind, even when the writer is killed.

A file is replaced by writing a temporary file beside it, fsyncing it, renaming it over
the target and fsyncing the directory: readers see the old content or the new, never a
mix. A writer killed mid-write (SIGKILL, power loss) leaves its temporary file behind;
the next write in the same directory reclaims it.

How a leftover is told from a live writer's file: every writer holds an exclusive
``flock`` on its temporary file from before it has any content until after the rename,
and the kernel drops that lock when the process dies. A temporary file whose lock can be
taken belongs to nobody and is removed. The one gap — between creating the file and
locking it — is closed from the writer's side: after locking, a writer whose file was
reclaimed in the gap (it has no name any more) starts over with a new one.

Everything works relative to a directory file descriptor and never follows a symlink,
so the memory tool can use it inside its confined tree.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from pathlib import Path

from . import _ctxbudget

__all__ = ["TMP_PREFIX", "atomic_write", "atomic_write_at", "fsync", "is_temp_name"]

TMP_PREFIX = ".tmp-ctxbudget-"
"""Names of temporary files; anything else in a directory is never reclaimed."""

_ATTEMPTS = 3
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_PROBE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def fsync(fd: int) -> None:
    """``os.fsync(fd)``; inside an awaited ``AsyncSession`` call the same on ctxbudget's
    I/O pool, so that the event loop does not wait for the disk."""
    if _ctxbudget._offload_active():
        _ctxbudget.fsync(fd)
    else:
        os.fsync(fd)


def is_temp_name(name: str) -> bool:
    """True for the name of a temporary file written here (live or left over)."""
    return name.startswith(TMP_PREFIX)


def atomic_write(path: Path, data: bytes) -> None:
    """Replaces ``path`` with ``data`` (see the module docstring). The directory must
    exist; ``path`` itself is replaced, never followed if it is a symlink."""
    dir_fd = os.open(path.parent, _DIR_FLAGS)
    try:
        atomic_write_at(dir_fd, path.name, data)
    finally:
        os.close(dir_fd)


def atomic_write_at(dir_fd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Replaces ``name`` in the directory open as ``dir_fd`` with ``data``.

    Stale temporary files of killed writers in that directory are reclaimed first.
    """
    reclaim_stale(dir_fd)
    for _ in range(_ATTEMPTS):
        tmp = TMP_PREFIX + secrets.token_hex(8)
        fd = os.open(tmp, _CREATE_FLAGS, mode, dir_fd=dir_fd)
        try:
            # Blocks only while a reclaimer holds the lock in the create-to-lock gap.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink == 0:
                continue  # reclaimed in the gap; the finally closes it
            try:
                _write_all(fd, data)
                fsync(fd)
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                _unlink_quietly(dir_fd, tmp)
                raise
        finally:
            os.close(fd)
        fsync(dir_fd)
        return
    raise OSError(f"could not write {name!r}: its temporary file was removed {_ATTEMPTS} times")


def reclaim_stale(dir_fd: int) -> int:
    """Removes temporary files in ``dir_fd`` whose writer is gone; returns how many."""
    try:
        with os.scandir(dir_fd) as it:
            names = [
                e.name for e in it if is_temp_name(e.name) and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return 0  # an unlistable directory: reclaiming is best effort, writing goes on
    removed = 0
    for name in names:
        try:
            fd = os.open(name, _PROBE_FLAGS, dir_fd=dir_fd)
        except OSError:
            continue  # gone meanwhile, or not ours to judge (a symlink, say)
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer holds it
            try:
                named = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # renamed into place by its writer
            if (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino):
                _unlink_quietly(dir_fd, name)
                removed += 1
        finally:
            os.close(fd)
    return removed


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _unlink_quietly(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)
