"""File operations confined to one directory tree, safe against a concurrent attacker.

Every path is resolved one component at a time, each opened relative to its parent's
open directory descriptor with ``O_NOFOLLOW``: a symlink anywhere on the way — planted
before the call or swapped in while it runs — makes the call fail instead of leading
outside. Every later step (stat, open, unlink, rename, mkdir) uses the ``*at`` form on
those descriptors, so nothing is resolved twice by name. Only regular files with a
single link are read, opened non-blocking and checked on the open descriptor: a FIFO
cannot block the reader and a hard link to a file elsewhere cannot be read through.

The tree's root directory is given by the caller and trusted; everything below it is not.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Entry",
    "Refused",
    "held",
    "list_dir",
    "lstat_at",
    "open_dir",
    "open_tree",
    "oversized_file",
    "read_regular",
    "remove_tree",
    "rename_noreplace",
    "walk",
]

# O_NONBLOCK: should a name turn into a FIFO, opening it can never wait for a writer.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
TREE_MAX_ENTRIES = 10_000
"""Most entries inspected when checking a directory tree before moving it."""


class Refused(Exception):
    """A request the tool turns down; ``code`` is the result's machine-readable code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@contextmanager
def held(fd: int) -> Iterator[int]:
    """Closes ``fd`` when the block ends."""
    try:
        yield fd
    finally:
        os.close(fd)


def _not_followed(shown: str) -> Refused:
    return Refused(
        "invalid_path",
        f"{shown} is a symlink or not a directory; memory paths never follow symlinks",
    )


def open_tree(root: Path, name: str, *, create: bool) -> int | None:
    """The descriptor of ``root/name`` (``root`` is trusted, ``name`` must be a real
    directory); ``None`` when it does not exist and ``create`` is false."""
    if create:
        root.mkdir(parents=True, exist_ok=True)
    try:
        parent = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with held(parent):
        return open_dir(parent, name, create=create, shown="/" + name)


def open_dir(parent: int, name: str, *, create: bool, shown: str) -> int | None:
    """``name`` in ``parent`` opened as a directory without following a symlink."""
    if create:
        with suppress(FileExistsError):
            os.mkdir(name, dir_fd=parent)
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            if _is_regular_file(parent, name):
                raise Refused("not_a_directory", f"{shown} is a file, not a directory") from None
            raise _not_followed(shown) from None
        raise


def _is_regular_file(parent: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def walk(root: int, parts: list[str], *, create: bool, shown: Callable[[int], str]) -> int:
    """A new descriptor of the directory ``parts`` below ``root`` (the caller closes it).

    Missing directories are created when ``create`` is true, else refused as
    ``not_found``. ``shown(n)`` names the first ``n`` components in messages.
    """
    fd = os.dup(root)
    try:
        for n, part in enumerate(parts, start=1):
            child = open_dir(fd, part, create=create, shown=shown(n))
            if child is None:
                raise Refused("not_found", f"{shown(n)} does not exist")
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat_at(parent: int, name: str, shown: str) -> os.stat_result:
    """``name``'s own status (a symlink is not followed); ``not_found`` if missing."""
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        raise Refused("not_found", f"{shown} does not exist") from None


def check_regular(st: os.stat_result, shown: str) -> None:
    """Refuses anything but a regular file with exactly one link."""
    if stat.S_ISLNK(st.st_mode):
        raise Refused("invalid_path", f"{shown} is a symlink; memory paths never follow symlinks")
    if stat.S_ISDIR(st.st_mode):
        raise Refused("is_directory", f"{shown} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise Refused(
            "unsupported_file",
            f"{shown} is not a regular file (a FIFO, socket or device); delete it",
        )
    if st.st_nlink != 1:
        raise Refused(
            "unsupported_file",
            f"{shown} has {st.st_nlink} hard links; only files with a single link are read "
            "or edited. Delete it and create it again",
        )


def read_regular(parent: int, name: str, limit: int, shown: str) -> bytes:
    """The bytes of regular file ``name`` (at most ``limit`` of them, else ``too_large``)."""
    check_regular(lstat_at(parent, name, shown), shown)
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        raise Refused("not_found", f"{shown} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("invalid_path", f"{shown} is a symlink") from None
        raise
    with held(fd):
        opened = os.fstat(fd)
        check_regular(opened, shown)  # what was opened, not what the name was before
        if opened.st_size > limit:
            raise _too_large(shown, opened.st_size, limit)
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise _too_large(shown, len(data), limit)
    return data


def _too_large(shown: str, size: int, limit: int) -> Refused:
    return Refused("too_large", f"{shown} is {size:,} bytes; files are read up to {limit:,}")


@dataclass(frozen=True, slots=True)
class Entry:
    """A directory entry as listed: a directory, or a regular file, its size and its
    number of hard links (a file with more than one is not read)."""

    name: str
    is_dir: bool
    size: int
    links: int = 1


def list_dir(fd: int, hide: Callable[[str], bool]) -> list[Entry]:
    """Directories and regular files in the directory ``fd``, sorted by name; symlinks,
    special files, names that are not UTF-8 and ``hide(name)`` are left out."""
    out = []
    with os.scandir(fd) as it:
        for entry in it:
            if hide(entry.name) or not _is_utf8(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                out.append(Entry(entry.name, True, 0))
            elif stat.S_ISREG(st.st_mode):
                out.append(Entry(entry.name, False, st.st_size, st.st_nlink))
    out.sort(key=lambda e: e.name)
    return out


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _tree(fd: int) -> Generator[tuple[str, os.stat_result]]:
    """``(relative path, lstat)`` of every entry in the tree below directory ``fd``
    (symlinks are not followed). Refuses trees of more than :data:`TREE_MAX_ENTRIES`
    entries. Close it (``contextlib.closing``) when not read to the end."""
    seen = 0
    stack: list[tuple[int, str]] = [(os.dup(fd), "")]
    try:
        while stack:
            dir_fd, prefix = stack.pop()
            with held(dir_fd), os.scandir(dir_fd) as it:
                for entry in it:
                    seen += 1
                    if seen > TREE_MAX_ENTRIES:
                        raise Refused(
                            "too_large",
                            f"the directory holds more than {TREE_MAX_ENTRIES:,} entries",
                        )
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    yield prefix + entry.name, st
                    if stat.S_ISDIR(st.st_mode):
                        child = open_dir(dir_fd, entry.name, create=False, shown=entry.name)
                        if child is not None:
                            stack.append((child, f"{prefix}{entry.name}/"))
    finally:
        for dir_fd, _ in stack:
            os.close(dir_fd)


def oversized_file(fd: int, limit: int) -> str | None:
    """The relative path of the first regular file over ``limit`` bytes in the tree below
    directory ``fd`` (symlinks are not followed), or ``None``. Refuses trees of more than
    :data:`TREE_MAX_ENTRIES` entries."""
    with closing(_tree(fd)) as entries:
        for path, st in entries:
            if stat.S_ISREG(st.st_mode) and st.st_size > limit:
                return path
    return None


def longest_path(fd: int) -> int:
    """Bytes of the longest relative path in the tree below directory ``fd`` (0 when it
    is empty). Refuses trees of more than :data:`TREE_MAX_ENTRIES` entries."""
    return max((len(os.fsencode(path)) for path, _ in _tree(fd)), default=0)


def remove_tree(parent: int, name: str, shown: str) -> None:
    """Deletes directory ``name`` in ``parent`` and everything in it, depth first,
    without following symlinks (a symlink inside is removed, not its target)."""
    top = open_dir(parent, name, create=False, shown=shown)
    if top is None:
        raise Refused("not_found", f"{shown} does not exist")
    # (parent fd, name, own fd); the first parent is the caller's and stays open.
    stack: list[tuple[int, str, int]] = [(parent, name, top)]
    try:
        while stack:
            up, own_name, own = stack[-1]
            subdir = None
            with os.scandir(own) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        subdir = entry.name
                        break
                    with suppress(FileNotFoundError):
                        os.unlink(entry.name, dir_fd=own)
            if subdir is not None:
                child = open_dir(own, subdir, create=False, shown=shown)
                if child is not None:
                    stack.append((own, subdir, child))
                continue
            stack.pop()
            os.close(own)
            os.rmdir(own_name, dir_fd=up)
    finally:
        for _, _, own in stack:
            os.close(own)


RENAME_NOREPLACE = 1


def _load_renameat2() -> Callable[..., int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()


def rename_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    """Moves ``src`` to ``dst`` (relative to their directories); ``FileExistsError`` if
    ``dst`` exists. Atomic where the system has ``renameat2(RENAME_NOREPLACE)``."""
    if _renameat2 is not None:
        if _renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err), dst)
        # EINVAL: a file system without RENAME_NOREPLACE (or a move into itself, which
        # the plain rename below reports again).
    try:
        os.stat(dst, dir_fd=dst_dir, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
