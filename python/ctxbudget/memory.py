"""The ``memory`` tool (SPEC §8): files under ``<workspace>/memories/``.

Commands ``view``, ``create``, ``str_replace``, ``insert``, ``delete``, ``rename`` on
paths under ``/memories/``. ``/memories/session/`` — the rollover checkpoint — exists only
in token-budget mode, belongs to this workspace, survives rollovers, and stays writable for
read-only agents; a checkpoint file holds at most 8 KiB. Paths are confined: no ``..``,
no absolute path outside ``/memories/``, no symlink anywhere on the way, no NUL, no
over-long names. Writes are atomic. Results are JSON objects the model can act on; bad
input is a result with ``ok: false`` and a ``code``, never an exception.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._shared import atomic_write, strict_parameters, tool_definition

__all__ = ["CHECKPOINT_MAX", "MemoryTool"]

CHECKPOINT_MAX = 8 * 1024
"""Largest file in ``/memories/session/``, in bytes of UTF-8."""
FILE_MAX = 256 * 1024
"""Largest file elsewhere under ``/memories/``."""
_NAME_MAX = 255
_PATH_MAX = 1024
_ROOT = "/memories"
_SESSION = "session"

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


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _fail(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "code": code, "error": message}


class MemoryTool:
    """``memory`` for one workspace.

    ``session_scope`` is true in token-budget mode (``/memories/session/`` exists);
    ``read_only`` agents may write only there.
    """

    name = "memory"

    __slots__ = ("_read_only", "_root", "_session_scope")

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        session_scope: bool = True,
        read_only: bool = False,
    ) -> None:
        self._root = Path(workspace).resolve() / "memories"
        self._session_scope = bool(session_scope)
        self._read_only = bool(read_only)

    @property
    def root(self) -> Path:
        """``<workspace>/memories`` on disk."""
        return self._root

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
            raise _Refused("invalid_path", "path must be a string such as /memories/notes.md")
        if "\x00" in virtual:
            raise _Refused("invalid_path", "path contains a NUL character")
        if len(virtual.encode("utf-8", "surrogatepass")) > _PATH_MAX:
            raise _Refused("invalid_path", f"path is longer than {_PATH_MAX} bytes")
        if "\\" in virtual:
            raise _Refused("invalid_path", "use / in paths, not backslashes")
        if virtual != _ROOT and not virtual.startswith(_ROOT + "/"):
            raise _Refused("invalid_path", "paths must be under /memories/, e.g. /memories/a.md")
        parts = [p for p in virtual[len(_ROOT) :].split("/") if p]
        for part in parts:
            if part in (".", ".."):
                raise _Refused("invalid_path", "'.' and '..' are not allowed in memory paths")
            try:
                encoded = part.encode("utf-8")
            except UnicodeEncodeError:
                raise _Refused("invalid_path", "path is not valid Unicode") from None
            if len(encoded) > _NAME_MAX:
                raise _Refused("invalid_path", f"a path component is longer than {_NAME_MAX} bytes")
        if parts and parts[0] == _SESSION and not self._session_scope:
            raise _Refused("not_available", "/memories/session/ exists only in token-budget mode")
        return parts

    def _resolve(self, virtual: object, *, write: bool) -> tuple[Path, bool]:
        """The on-disk path and whether it is in the session scope. Refuses symlinks on
        the way, so nothing outside ``<workspace>/memories`` is ever touched."""
        parts = self._parts(virtual)
        in_session = bool(parts) and parts[0] == _SESSION
        if write and self._read_only and not in_session:
            raise _Refused("not_allowed", "read-only agents may write only in /memories/session/")
        path = self._root.joinpath(*parts)
        # Walk from the root: no component may be a symlink (an escape or a trap).
        probe = self._root
        if probe.is_symlink():
            raise _Refused("invalid_path", "the memories directory is a symlink; refusing")
        for part in parts:
            probe = probe / part
            try:
                st = os.lstat(probe)
            except FileNotFoundError:
                break
            if stat.S_ISLNK(st.st_mode):
                raise _Refused("invalid_path", "symlinks are not allowed under /memories/")
        return path, in_session

    def _virtual(self, path: Path) -> str:
        rel = path.relative_to(self._root).as_posix()
        return _ROOT if rel == "." else f"{_ROOT}/{rel}"

    # ----- writing -------------------------------------------------------------------

    def _write(self, path: Path, text: str, in_session: bool) -> None:
        data = text.encode("utf-8", "surrogatepass")
        limit = CHECKPOINT_MAX if in_session else FILE_MAX
        if len(data) > limit:
            where = "a checkpoint file in /memories/session/" if in_session else "a memory file"
            raise _Refused(
                "too_large",
                f"{where} holds at most {limit:,} bytes; this would be {len(data):,}. "
                "Keep the checkpoint short: goal, decisions, progress, next steps, IDs.",
            )
        self._makedirs(path.parent)
        if path.is_dir():
            raise _Refused("is_directory", "that path is a directory")
        atomic_write(path, data)

    def _makedirs(self, directory: Path) -> None:
        self._root.mkdir(parents=True, exist_ok=True)
        if self._root.is_symlink():
            raise _Refused("invalid_path", "the memories directory is a symlink; refusing")
        current = self._root
        for part in directory.relative_to(self._root).parts:
            current = current / part
            try:
                os.mkdir(current)
            except FileExistsError:
                if current.is_symlink() or not current.is_dir():
                    raise _Refused("invalid_path", f"{current.name} is not a directory") from None

    @staticmethod
    def _sync_dir(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _read(path: Path) -> str:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            return f.read().decode("utf-8", "replace")

    # ----- commands ------------------------------------------------------------------

    def call(self, args: Mapping[str, Any] | str) -> dict[str, Any]:
        """Runs one command; always returns a result dict."""
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return _fail("invalid_arguments", "arguments are not valid JSON")
        if not isinstance(args, Mapping):
            return _fail("invalid_arguments", "arguments must be a JSON object")
        args = {k: v for k, v in args.items() if v is not None}
        unknown = set(args) - set(_SCHEMA["properties"])
        if unknown:
            return _fail("invalid_arguments", f"unknown arguments: {sorted(unknown)[:5]}")
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
            return _fail(
                "invalid_arguments",
                "command must be one of view, create, str_replace, insert, delete, rename",
            )
        try:
            return handler(args)
        except _Refused as refused:
            return _fail(refused.code, str(refused))
        except OSError as exc:
            return _fail("io_error", f"the memory file could not be accessed: {exc.strerror}")

    def _need(self, args: Mapping[str, Any], key: str, kind: type) -> Any:
        value = args.get(key)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise _Refused("invalid_arguments", f"{key} is required ({kind.__name__})")
        return value

    def _view(self, args: Mapping[str, Any]) -> dict[str, Any]:
        path, _ = self._resolve(args.get("path", _ROOT), write=False)
        if path == self._root and not path.exists():
            return {"ok": True, "path": _ROOT, "entries": []}
        if not path.exists():
            raise _Refused("not_found", f"{args.get('path')} does not exist")
        if path.is_dir():
            entries = []
            for child in sorted(path.iterdir()):
                if child.is_symlink() or child.name.startswith(".tmp-"):
                    continue
                if child == self._root / _SESSION and not self._session_scope:
                    continue
                if child.is_dir():
                    entries.append(self._virtual(child) + "/")
                else:
                    entries.append(f"{self._virtual(child)} ({child.stat().st_size} bytes)")
            return {"ok": True, "path": self._virtual(path), "entries": entries[:500]}
        lines = self._read(path).split("\n")
        first, last = 1, len(lines)
        rng = args.get("view_range")
        if rng is not None:
            if (
                not isinstance(rng, list)
                or len(rng) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in rng)
            ):
                raise _Refused("invalid_arguments", "view_range is [first_line, last_line]")
            first, last = max(1, rng[0]), (len(lines) if rng[1] == -1 else min(rng[1], len(lines)))
        numbered = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(first, last + 1))
        return {"ok": True, "path": self._virtual(path), "content": numbered}

    def _create(self, args: Mapping[str, Any]) -> dict[str, Any]:
        path, in_session = self._resolve(self._need(args, "path", str), write=True)
        if path == self._root:
            raise _Refused("invalid_path", "give a file path under /memories/")
        self._write(path, self._need(args, "file_text", str), in_session)
        return {"ok": True, "path": self._virtual(path), "status": "written"}

    def _existing_file(self, args: Mapping[str, Any], key: str = "path") -> tuple[Path, bool]:
        path, in_session = self._resolve(self._need(args, key, str), write=True)
        if not path.is_file():
            raise _Refused("not_found", f"{args.get(key)} is not an existing file")
        return path, in_session

    def _str_replace(self, args: Mapping[str, Any]) -> dict[str, Any]:
        path, in_session = self._existing_file(args)
        old = self._need(args, "old_str", str)
        new = args.get("new_str", "")
        if not isinstance(new, str):
            raise _Refused("invalid_arguments", "new_str must be a string")
        if not old:
            raise _Refused("invalid_arguments", "old_str must not be empty")
        text = self._read(path)
        count = text.count(old)
        if count != 1:
            raise _Refused(
                "not_found" if count == 0 else "ambiguous",
                f"old_str occurs {count} times; it must occur exactly once",
            )
        self._write(path, text.replace(old, new, 1), in_session)
        return {"ok": True, "path": self._virtual(path), "status": "replaced"}

    def _insert(self, args: Mapping[str, Any]) -> dict[str, Any]:
        path, in_session = self._existing_file(args)
        line = self._need(args, "insert_line", int)
        insert = self._need(args, "insert_text", str)
        lines = self._read(path).split("\n")
        if not 0 <= line <= len(lines):
            raise _Refused("invalid_arguments", f"insert_line must be from 0 to {len(lines)}")
        lines[line:line] = insert.split("\n")
        self._write(path, "\n".join(lines), in_session)
        return {"ok": True, "path": self._virtual(path), "status": "inserted"}

    def _delete(self, args: Mapping[str, Any]) -> dict[str, Any]:
        path, _ = self._resolve(self._need(args, "path", str), write=True)
        if path in (self._root, self._root / _SESSION):
            raise _Refused("not_allowed", "the memory root and the session scope cannot be deleted")
        if path.is_symlink() or not path.exists():
            raise _Refused("not_found", f"{args.get('path')} does not exist")
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
        self._sync_dir(path.parent)
        return {"ok": True, "path": self._virtual(path), "status": "deleted"}

    def _rename(self, args: Mapping[str, Any]) -> dict[str, Any]:
        old, old_session = self._resolve(self._need(args, "old_path", str), write=True)
        new, new_session = self._resolve(self._need(args, "new_path", str), write=True)
        if old in (self._root, self._root / _SESSION) or new == self._root:
            raise _Refused("not_allowed", "the memory root and the session scope cannot be moved")
        if not old.exists() or old.is_symlink():
            raise _Refused("not_found", f"{args.get('old_path')} does not exist")
        if new.exists():
            raise _Refused("exists", f"{args.get('new_path')} already exists")
        if (
            new_session
            and not old_session
            and old.is_file()
            and old.stat().st_size > CHECKPOINT_MAX
        ):
            raise _Refused("too_large", "checkpoint files hold at most 8 KiB")
        self._makedirs(new.parent)
        os.rename(old, new)
        self._sync_dir(new.parent)
        return {"ok": True, "path": self._virtual(new), "status": "renamed"}
