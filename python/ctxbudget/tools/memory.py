"""The ``memory`` tool (SPEC §8): a conversation's memory files.

Commands ``view``, ``create``, ``str_replace``, ``insert``, ``delete``, ``rename`` on
paths under ``/memories/``. ``/memories/session/`` — the rollover checkpoint — exists only
in token-budget mode, belongs to this conversation, survives rollovers, and stays writable
for read-only agents; a checkpoint file holds at most 8 KiB. Paths are confined: no
``..``, no absolute path outside ``/memories/``, no symlink anywhere on the way, no NUL,
no over-long names. Writes are atomic. Results are JSON objects the model can act on; bad
input is a result with ``ok: false`` and a ``code``, never an exception.

This module is the one command layer; the files live in one of two stores with the same
operations: a workspace's ``<workspace>/memories/`` (:mod:`._memory_disk`, every path
resolved from an open descriptor without following symlinks — see docs/concepts.md,
"Memory tool security model"), or, for a PostgreSQL conversation, rows of the same
database (:mod:`._memory_db`, no file-system path at all).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from .._atomic import is_temp_name
from .._confined import Entry, Refused
from .._shared import strict_parameters, tool_definition
from ..errors import CtxBudgetError, DatabaseError
from ..history import History, workspace_path
from ._memory_db import DatabaseMemory
from ._memory_disk import DiskMemory
from ._memory_paths import CHECKPOINT_MAX, FILE_MAX, NAME_MAX, PATH_MAX, ROOT, SESSION
from ._memory_paths import shown as _shown
from ._memory_paths import too_large as _too_large
from .failure import store_failure

__all__ = ["CHECKPOINT_MAX", "MemoryTool"]

_DESCRIPTION = (
    "Read and write your memory files under /memories/. Your checkpoint for context "
    "handoffs lives in /memories/session/ (at most 8 KiB per file). Commands: view (a file "
    "or directory), create (write a whole file), str_replace (replace one exact, unique "
    "occurrence), insert (insert text after a line number), delete, rename."
)

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {
            "type": "string",
            "enum": ["view", "create", "str_replace", "insert", "delete", "rename"],
        },
        "path": {"type": "string", "description": "A path under /memories/."},
        "file_text": {"type": "string", "description": "create: the whole file."},
        "old_str": {"type": "string", "description": "str_replace: exact text to replace."},
        "new_str": {"type": "string", "description": "str_replace: replacement text."},
        "insert_line": {"type": "integer", "description": "insert: line number to insert after."},
        "insert_text": {"type": "string", "description": "insert: text to insert."},
        "view_range": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "view: [first_line, last_line] of a file (1-based; -1 = end).",
        },
        "old_path": {"type": "string", "description": "rename: current path."},
        "new_path": {"type": "string", "description": "rename: new path."},
    },
    "required": ["command"],
    "additionalProperties": False,
}


_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


def _fail(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "code": code, "error": message}


class MemoryStore(Protocol):
    """Where a conversation's memory files live (paths are validated components)."""

    def where(self) -> str: ...

    def view(self, parts: list[str]) -> list[Entry] | str: ...

    def write(self, parts: list[str], data: bytes) -> None: ...

    def update(self, parts: list[str], change: Callable[[str], bytes]) -> None: ...

    def delete(self, parts: list[str]) -> None: ...

    def rename(self, old: list[str], new: list[str], *, into_session: bool) -> None: ...


class MemoryTool:
    """``memory`` for one conversation: a workspace directory (its ``memories/``) or a
    :class:`~ctxbudget.History` (its workspace's ``memories/``, or, for a PostgreSQL
    conversation, the memory files kept in that database).

    ``session_scope`` is true in token-budget mode (``/memories/session/`` exists);
    ``read_only`` agents may write only there.
    """

    name = "memory"

    __slots__ = ("_read_only", "_session_scope", "_store")

    def __init__(
        self,
        target: str | os.PathLike[str] | History,
        *,
        session_scope: bool = True,
        read_only: bool = False,
    ) -> None:
        self._store: MemoryStore
        if isinstance(target, History):
            if target.workspace is None:
                self._store = DatabaseMemory(target)
            else:
                self._store = DiskMemory(target.workspace.resolve())
        else:
            # A URL-like string is refused (never a directory named after it).
            self._store = DiskMemory(workspace_path(target).resolve())
        self._session_scope = bool(session_scope)
        self._read_only = bool(read_only)

    @property
    def root(self) -> Path | None:
        """``<workspace>/memories`` on disk; ``None`` for a PostgreSQL conversation
        (its files are rows of the database)."""
        return self._store.root if isinstance(self._store, DiskMemory) else None

    @property
    def location(self) -> str:
        """Where the files live, for messages."""
        return self._store.where()

    @property
    def description(self) -> str:
        return _DESCRIPTION

    def schema(self, flavor: str = "json") -> dict[str, Any]:
        """``json``, ``openai``, ``openai_responses`` or ``anthropic`` tool definition."""
        params = json.loads(json.dumps(_SCHEMA))
        strict = strict_parameters(params, required="command")
        return tool_definition(flavor, self.name, _DESCRIPTION, params, strict)

    # ----- paths ---------------------------------------------------------------------

    def _parts(self, virtual: object) -> list[str]:
        """Validated components of a ``/memories/…`` path (empty list = the root)."""
        if not isinstance(virtual, str):
            raise Refused("invalid_path", "path must be a string such as /memories/notes.md")
        if "\x00" in virtual:
            raise Refused("invalid_path", "path contains a NUL character")
        if len(virtual.encode("utf-8", "surrogatepass")) > PATH_MAX:
            raise Refused("invalid_path", f"path is longer than {PATH_MAX} bytes")
        if "\\" in virtual:
            raise Refused("invalid_path", "use / in paths, not backslashes")
        if virtual != ROOT and not virtual.startswith(ROOT + "/"):
            raise Refused("invalid_path", "paths must be under /memories/, e.g. /memories/a.md")
        parts = [p for p in virtual[len(ROOT) :].split("/") if p]
        for part in parts:
            if part in (".", ".."):
                raise Refused("invalid_path", "'.' and '..' are not allowed in memory paths")
            try:
                encoded = part.encode("utf-8")
            except UnicodeEncodeError:
                raise Refused("invalid_path", "path is not valid Unicode") from None
            if len(encoded) > NAME_MAX:
                raise Refused("invalid_path", f"a path component is longer than {NAME_MAX} bytes")
            if is_temp_name(part):
                raise Refused("invalid_path", f"names starting with {part[:15]!r} are reserved")
        if parts and parts[0] == SESSION and not self._session_scope:
            raise Refused("not_available", "/memories/session/ exists only in token-budget mode")
        return parts

    def _locate(self, virtual: object, *, write: bool) -> tuple[list[str], bool]:
        """The path's components and whether it is in the session scope."""
        parts = self._parts(virtual)
        in_session = bool(parts) and parts[0] == SESSION
        if write and self._read_only and not in_session:
            raise Refused("not_allowed", "read-only agents may write only in /memories/session/")
        return parts, in_session

    @staticmethod
    def _encode(text: str, in_session: bool) -> bytes:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(
                "invalid_arguments", "the text contains a lone surrogate (not valid Unicode)"
            ) from None
        if len(data) > (CHECKPOINT_MAX if in_session else FILE_MAX):
            raise _too_large(in_session, len(data))
        return data

    # ----- commands ------------------------------------------------------------------

    def call(self, args: Mapping[str, Any] | str) -> dict[str, Any]:
        """Runs one command; always returns a result dict."""
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                return _fail("invalid_arguments", "arguments are not valid JSON")
        if not isinstance(args, Mapping):
            return _fail("invalid_arguments", "arguments must be a JSON object")
        if not all(isinstance(k, str) for k in args):
            return _fail("invalid_arguments", "argument names must be strings")
        args = {k: v for k, v in args.items() if v is not None}
        unknown = set(args) - set(_SCHEMA["properties"])
        if unknown:
            shown = ", ".join(repr(k[:40]) for k in sorted(unknown)[:5])
            return _fail("invalid_arguments", f"unknown arguments: {shown}")
        command = args.get("command")
        handler = {
            "view": self._view,
            "create": self._create,
            "str_replace": self._str_replace,
            "insert": self._insert,
            "delete": self._delete,
            "rename": self._rename,
        }.get(command if isinstance(command, str) else "")
        if handler is None:
            return _fail("invalid_arguments", f"command must be one of {', '.join(_COMMANDS)}")
        try:
            return handler(args)
        except Refused as refused:
            return _fail(refused.code, str(refused))
        except DatabaseError as exc:  # before OSError: it is a ConnectionError too
            again = " Try again." if exc.transient else ""
            return _fail("io_error", f"the memory files could not be reached: {exc}{again}")
        except FileNotFoundError:
            return _fail(
                "not_found",
                "a file or directory on that path disappeared while the command ran; "
                "view it and try again",
            )
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return _fail("io_error", f"the memory file could not be accessed: {reason}")
        except CtxBudgetError as exc:  # anything else the store raised is a result too
            return store_failure(exc)

    def _need(self, args: Mapping[str, Any], key: str, kind: type) -> Any:
        value = args.get(key)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise Refused("invalid_arguments", f"{key} is required ({kind.__name__})")
        return value

    def _view(self, args: Mapping[str, Any]) -> dict[str, Any]:
        parts, _ = self._locate(args.get("path", ROOT), write=False)
        rng = args.get("view_range")
        if rng is not None and (
            not isinstance(rng, list)
            or len(rng) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in rng)
        ):
            raise Refused("invalid_arguments", "view_range is [first_line, last_line]")
        found = self._store.view(parts)
        if not isinstance(found, str):
            return self._listing(found, parts)
        lines = found.split("\n")
        first, last = 1, len(lines)
        if rng is not None:
            first, last = max(1, rng[0]), (len(lines) if rng[1] == -1 else min(rng[1], len(lines)))
        numbered = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(first, last + 1))
        return {"ok": True, "path": _shown(parts), "content": numbered}

    def _listing(self, found: list[Entry], parts: list[str]) -> dict[str, Any]:
        hide_session = not parts and not self._session_scope
        entries = []
        for entry in found:
            if hide_session and entry.name == SESSION:
                continue
            shown = _shown([*parts, entry.name])
            if entry.is_dir:
                entries.append(f"{shown}/")
            elif entry.links != 1:  # its size would describe a file that may lie outside
                entries.append(f"{shown} (not readable: {entry.links} hard links)")
            else:
                entries.append(f"{shown} ({entry.size} bytes)")
        return {"ok": True, "path": _shown(parts), "entries": entries[:500]}

    def _create(self, args: Mapping[str, Any]) -> dict[str, Any]:
        parts, in_session = self._locate(self._need(args, "path", str), write=True)
        if not parts:
            raise Refused("invalid_path", "give a file path under /memories/")
        self._store.write(parts, self._encode(self._need(args, "file_text", str), in_session))
        return {"ok": True, "path": _shown(parts), "status": "written"}

    def _edit(self, args: Mapping[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
        """Replaces the file at ``path`` with ``change(its text)``, atomically."""
        parts, in_session = self._locate(self._need(args, "path", str), write=True)
        if not parts:
            raise Refused("is_directory", "/memories is a directory")
        self._store.update(parts, lambda text: self._encode(change(text), in_session))
        return {"ok": True, "path": _shown(parts)}

    def _str_replace(self, args: Mapping[str, Any]) -> dict[str, Any]:
        old = self._need(args, "old_str", str)
        new = args.get("new_str", "")
        if not isinstance(new, str):
            raise Refused("invalid_arguments", "new_str must be a string")
        if not old:
            raise Refused("invalid_arguments", "old_str must not be empty")

        def change(text: str) -> str:
            count = text.count(old)
            if count != 1:
                raise Refused(
                    "not_found" if count == 0 else "ambiguous",
                    f"old_str occurs {count} times; it must occur exactly once",
                )
            return text.replace(old, new, 1)

        return {**self._edit(args, change), "status": "replaced"}

    def _insert(self, args: Mapping[str, Any]) -> dict[str, Any]:
        line = self._need(args, "insert_line", int)
        insert = self._need(args, "insert_text", str)

        def change(text: str) -> str:
            lines = text.split("\n")
            if not 0 <= line <= len(lines):
                raise Refused("invalid_arguments", f"insert_line must be from 0 to {len(lines)}")
            lines[line:line] = insert.split("\n")
            return "\n".join(lines)

        return {**self._edit(args, change), "status": "inserted"}

    def _delete(self, args: Mapping[str, Any]) -> dict[str, Any]:
        parts, _ = self._locate(self._need(args, "path", str), write=True)
        if parts in ([], [SESSION]):
            raise Refused("not_allowed", "the memory root and the session scope cannot be deleted")
        self._store.delete(parts)
        return {"ok": True, "path": _shown(parts), "status": "deleted"}

    def _rename(self, args: Mapping[str, Any]) -> dict[str, Any]:
        old, _ = self._locate(self._need(args, "old_path", str), write=True)
        new, new_session = self._locate(self._need(args, "new_path", str), write=True)
        if old in ([], [SESSION]) or not new:
            raise Refused("not_allowed", "the memory root and the session scope cannot be moved")
        if new[: len(old)] == old:
            raise Refused("invalid_path", "new_path must not be old_path or inside it")
        self._store.rename(old, new, into_session=new_session)
        return {"ok": True, "path": _shown(new), "status": "renamed"}
