"""What the in-memory backend (``memory:NAME``) keeps beside its transcript: the memory
files of the ``memory`` tool and the budget record, per name, for the life of the
process. The transcript itself is the core's (``ctxbudget::memory``); a delete removes
both and reports them together, as a workspace's or a database conversation's does.

The memory files follow the database store's model (a file is a path and its bytes; a
directory exists while some file lies under it) with the same paths, limits and
refusal codes, so the ``memory`` tool's command layer (:mod:`.tools._memory_db`) runs
over either unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from . import _ctxbudget
from ._confined import Refused

__all__ = ["MemoryFiles", "delete", "extras"]

CHECKPOINT_MAX = 8 * 1024
FILE_MAX = 256 * 1024
NAME_MAX = 255
PATH_MAX = 1024
_ROOT = "/memories"


@dataclass
class Extras:
    """The memory files and budget record of one in-memory store."""

    files: dict[str, bytes] = field(default_factory=dict)
    budget_record: bytes | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_registry: dict[str, Extras] = {}
_registry_lock = threading.Lock()


def extras(name: str) -> Extras:
    """The extras of the in-memory store ``name`` (created empty the first time)."""
    with _registry_lock:
        return _registry.setdefault(name, Extras())


def delete(name: str) -> _ctxbudget.DeleteReport:
    """Deletes the in-memory store ``name``: its rows, memory files and budget record."""
    with _registry_lock:
        gone = _registry.pop(name, None)
    files = budget = 0
    if gone is not None:
        with gone.lock:
            files, budget = len(gone.files), int(gone.budget_record is not None)
            gone.files.clear()
            gone.budget_record = None
    return _ctxbudget.History.delete_memory(name, memory_files=files, other_files=budget)


def _parse(path: str) -> list[str]:
    def bad(message: str) -> Refused:
        return Refused("invalid_path", message)

    if "\0" in path:
        raise bad("path contains a NUL character")
    if len(path.encode()) > PATH_MAX:
        raise bad(f"path is longer than {PATH_MAX} bytes")
    if "\\" in path:
        raise bad("use / in paths, not backslashes")
    if path == _ROOT:
        rest = ""
    elif path.startswith(_ROOT + "/"):
        rest = path[len(_ROOT) + 1 :]
    else:
        raise bad("paths must be under /memories/, e.g. /memories/a.md")
    parts = [p for p in rest.split("/") if p]
    for part in parts:
        if part in (".", ".."):
            raise bad("'.' and '..' are not allowed in memory paths")
        if len(part.encode()) > NAME_MAX:
            raise bad(f"a path component is longer than {NAME_MAX} bytes")
    return parts


def _shown(parts: list[str]) -> str:
    return "/".join([_ROOT, *parts])


def _limit(parts: list[str]) -> int:
    return CHECKPOINT_MAX if parts[:1] == ["session"] else FILE_MAX


def _too_large(parts: list[str], size: int) -> Refused:
    place = (
        "a checkpoint file in /memories/session/" if parts[:1] == ["session"] else "a memory file"
    )
    return Refused(
        "too_large",
        f"{place} holds at most {_limit(parts)} bytes; this would be {size}. Keep the "
        "checkpoint short: goal, decisions, progress, next steps, IDs.",
    )


def _not_found(parts: list[str]) -> Refused:
    return Refused("not_found", f"{_shown(parts)} does not exist")


class MemoryFiles:
    """The memory files of one in-memory store, with the database store's calls (paths
    as strings, each call atomic under the store's lock)."""

    __slots__ = ("_x",)

    def __init__(self, name: str) -> None:
        self._x = extras(name)

    def _under(self, parts: list[str]) -> list[tuple[str, int]]:
        prefix = _shown(parts) + "/"
        return sorted((p, len(b)) for p, b in self._x.files.items() if p.startswith(prefix))

    def _file(self, parts: list[str]) -> bytes | None:
        return self._x.files.get(_shown(parts)) if parts else None

    def _existing(self, parts: list[str]) -> bytes:
        old = self._file(parts)
        if old is not None:
            return old
        if self._under(parts):
            raise Refused("is_directory", f"{_shown(parts)} is a directory")
        raise _not_found(parts)

    def _check_no_file_above(self, parts: list[str]) -> None:
        for n in range(1, len(parts)):
            if _shown(parts[:n]) in self._x.files:
                raise Refused(
                    "not_a_directory",
                    f"{_shown(parts[:n])} is a file, so {_shown(parts)} cannot be created in it",
                )

    def read(self, path: str) -> bytes:
        parts = _parse(path)
        with self._x.lock:
            found = self._file(parts)
            if found is not None:
                return found
            if self._under(parts):
                raise Refused(
                    "is_directory",
                    f"{_shown(parts)} is a directory; view it or name a file in it",
                )
            raise _not_found(parts)

    def entries(self, path: str) -> list[tuple[str, bool, int]]:
        parts = _parse(path)
        with self._x.lock:
            files = self._under(parts)
            if not files and parts:
                if self._file(parts) is not None:
                    raise Refused("not_a_directory", f"{_shown(parts)} is a file, not a directory")
                raise _not_found(parts)
            prefix = _shown(parts) + "/"
            sizes: dict[tuple[str, bool], int] = {}
            for p, size in files:
                name, slash, _ = p[len(prefix) :].partition("/")
                key = (name, bool(slash))
                sizes[key] = sizes.get(key, 0) + size
            return [(prefix + name, is_dir, size) for (name, is_dir), size in sorted(sizes.items())]

    def write(self, path: str, content: bytes) -> None:
        parts = _parse(path)
        if not parts:
            raise Refused("invalid_path", "give a file path under /memories/")
        if len(content) > _limit(parts):
            raise _too_large(parts, len(content))
        with self._x.lock:
            if self._under(parts):
                raise Refused("is_directory", f"{_shown(parts)} is a directory")
            self._check_no_file_above(parts)
            self._x.files[_shown(parts)] = bytes(content)

    def update(self, path: str, edit: Callable[[bytes], bytes]) -> None:
        parts = _parse(path)
        with self._x.lock:
            old = self._existing(parts)
        # The edit runs outside the lock (it is the caller's code); it commits only if
        # the file is still what it read, else it runs again on the new bytes.
        while True:
            new = bytes(edit(old))
            if len(new) > _limit(parts):
                raise _too_large(parts, len(new))
            with self._x.lock:
                now = self._existing(parts)
                if now == old:
                    self._x.files[_shown(parts)] = new
                    return
                old = now

    def delete(self, path: str) -> None:
        parts = _parse(path)
        if not parts:
            raise Refused(
                "invalid_path", "/memories itself cannot be deleted; name a file or directory in it"
            )
        with self._x.lock:
            doomed = [p for p, _ in self._under(parts)]
            if self._file(parts) is not None:
                doomed.append(_shown(parts))
            if not doomed:
                raise _not_found(parts)
            for p in doomed:
                del self._x.files[p]

    def rename(self, old_path: str, new_path: str) -> None:
        old, new = _parse(old_path), _parse(new_path)
        if not old or not new:
            raise Refused(
                "invalid_path", "/memories itself cannot be renamed; name a file or directory in it"
            )
        if new[: len(old)] == old:
            raise Refused("invalid_path", "new_path must not be old_path or inside it")
        with self._x.lock:
            file = self._file(old)
            moved = [(_shown(old), len(file))] if file is not None else self._under(old)
            if not moved:
                raise _not_found(old)
            if new[:1] == ["session"]:
                for p, size in moved:
                    if size > CHECKPOINT_MAX:
                        raise Refused(
                            "too_large",
                            f"{p} is over {CHECKPOINT_MAX} bytes, the most a file in "
                            f"/memories/session/ may hold; shorten it first ({size} bytes)",
                        )
            if file is not None:
                src, dst = _shown(old), _shown(new)
            else:
                src, dst = _shown(old) + "/", _shown(new) + "/"
            longest = max(len(p.encode()) for p, _ in moved)
            grown = longest - len(src.encode()) + len(dst.encode())
            if grown > PATH_MAX:
                raise Refused(
                    "invalid_path",
                    f"the move would give a file a path of {grown} bytes, over the "
                    f"{PATH_MAX}-byte limit; choose a shorter new_path",
                )
            self._check_no_file_above(new)
            if self._file(new) is not None or self._under(new):
                raise Refused("exists", f"{_shown(new)} already exists")
            for p, _ in moved:
                self._x.files[dst + p[len(src) :]] = self._x.files.pop(p)
