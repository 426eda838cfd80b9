"""The ``memory`` tool (SPEC §8): files under ``<workspace>/memories/``.

Commands ``view``, ``create``, ``str_replace``, ``insert``, ``delete``, ``rename`` on
paths under ``/memories/``. ``/memories/session/`` — the rollover checkpoint — exists only
in token-budget mode, belongs to this workspace, survives rollovers, and stays writable for
read-only agents; a checkpoint file holds at most 8 KiB. Paths are confined: no ``..``,
no absolute path outside ``/memories/``, no symlink anywhere on the way, no NUL, no
over-long names. Writes are atomic. Results are JSON objects the model can act on; bad
input is a result with ``ok: false`` and a ``code``, never an exception.

Every file operation goes through :mod:`._confined`: paths are resolved from an open
descriptor of ``memories/`` one component at a time without following symlinks, so a
symlink swapped in while a command runs cannot lead outside (see docs/concepts.md,
"Memory tool security model").
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._atomic import atomic_write_at, fsync, is_temp_name
from .._confined import (
    Refused,
    held,
    list_dir,
    lstat_at,
    open_dir,
    open_tree,
    oversized_file,
    read_regular,
    remove_tree,
    rename_noreplace,
    walk,
)
from .._shared import strict_parameters, tool_definition

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


_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


def _fail(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "code": code, "error": message}


def _shown(parts: list[str], n: int | None = None) -> str:
    """The virtual path of the first ``n`` components (all by default)."""
    chosen = parts if n is None else parts[:n]
    return "/".join([_ROOT, *chosen])


def _too_large(in_session: bool, size: int) -> Refused:
    limit = CHECKPOINT_MAX if in_session else FILE_MAX
    where = "a checkpoint file in /memories/session/" if in_session else "a memory file"
    return Refused(
        "too_large",
        f"{where} holds at most {limit:,} bytes; this would be {size:,}. "
        "Keep the checkpoint short: goal, decisions, progress, next steps, IDs.",
    )


class MemoryTool:
    """``memory`` for one workspace.

    ``session_scope`` is true in token-budget mode (``/memories/session/`` exists);
    ``read_only`` agents may write only there.
    """

    name = "memory"

    __slots__ = ("_read_only", "_session_scope", "_workspace")

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        session_scope: bool = True,
        read_only: bool = False,
    ) -> None:
        self._workspace = Path(workspace).resolve()
        self._session_scope = bool(session_scope)
        self._read_only = bool(read_only)

    @property
    def root(self) -> Path:
        """``<workspace>/memories`` on disk."""
        return self._workspace / "memories"

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
        if len(virtual.encode("utf-8", "surrogatepass")) > _PATH_MAX:
            raise Refused("invalid_path", f"path is longer than {_PATH_MAX} bytes")
        if "\\" in virtual:
            raise Refused("invalid_path", "use / in paths, not backslashes")
        if virtual != _ROOT and not virtual.startswith(_ROOT + "/"):
            raise Refused("invalid_path", "paths must be under /memories/, e.g. /memories/a.md")
        parts = [p for p in virtual[len(_ROOT) :].split("/") if p]
        for part in parts:
            if part in (".", ".."):
                raise Refused("invalid_path", "'.' and '..' are not allowed in memory paths")
            try:
                encoded = part.encode("utf-8")
            except UnicodeEncodeError:
                raise Refused("invalid_path", "path is not valid Unicode") from None
            if len(encoded) > _NAME_MAX:
                raise Refused("invalid_path", f"a path component is longer than {_NAME_MAX} bytes")
            if is_temp_name(part):
                raise Refused("invalid_path", f"names starting with {part[:15]!r} are reserved")
        if parts and parts[0] == _SESSION and not self._session_scope:
            raise Refused("not_available", "/memories/session/ exists only in token-budget mode")
        return parts

    def _locate(self, virtual: object, *, write: bool) -> tuple[list[str], bool]:
        """The path's components and whether it is in the session scope."""
        parts = self._parts(virtual)
        in_session = bool(parts) and parts[0] == _SESSION
        if write and self._read_only and not in_session:
            raise Refused("not_allowed", "read-only agents may write only in /memories/session/")
        return parts, in_session

    def _open_root(self, *, create: bool) -> int | None:
        return open_tree(self._workspace, "memories", create=create)

    def _existing_root(self, parts: list[str]) -> int:
        root = self._open_root(create=False)
        if root is None:
            raise Refused("not_found", f"{_shown(parts)} does not exist")
        return root

    def _parent(self, root: int, parts: list[str], *, create: bool) -> int:
        """The open directory holding ``parts[-1]``."""
        return walk(root, parts[:-1], create=create, shown=lambda n: _shown(parts, n))

    # ----- writing -------------------------------------------------------------------

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

    @staticmethod
    def _replace(parent: int, parts: list[str], data: bytes) -> None:
        """Atomically replaces the regular file ``parts[-1]`` in ``parent`` (or creates it)."""
        name = parts[-1]
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(st.st_mode):
                raise Refused("is_directory", f"{_shown(parts)} is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise Refused(
                    "unsupported_file",
                    f"{_shown(parts)} is a symlink or special file; delete it first",
                )
        # Whatever the name holds by now, the rename replaces the name, never a target.
        atomic_write_at(parent, name, data)

    def _read_text(self, parent: int, parts: list[str]) -> str:
        return read_regular(parent, parts[-1], FILE_MAX, _shown(parts)).decode("utf-8", "replace")

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
        except FileNotFoundError:
            return _fail(
                "not_found",
                "a file or directory on that path disappeared while the command ran; "
                "view it and try again",
            )
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return _fail("io_error", f"the memory file could not be accessed: {reason}")

    def _need(self, args: Mapping[str, Any], key: str, kind: type) -> Any:
        value = args.get(key)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise Refused("invalid_arguments", f"{key} is required ({kind.__name__})")
        return value

    def _view(self, args: Mapping[str, Any]) -> dict[str, Any]:
        parts, _ = self._locate(args.get("path", _ROOT), write=False)
        rng = args.get("view_range")
        if rng is not None and (
            not isinstance(rng, list)
            or len(rng) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in rng)
        ):
            raise Refused("invalid_arguments", "view_range is [first_line, last_line]")
        root = self._open_root(create=False)
        if root is None:
            if not parts:
                return {"ok": True, "path": _ROOT, "entries": []}
            raise Refused("not_found", f"{_shown(parts)} does not exist")
        with held(root):
            if not parts:
                return self._listing(root, parts)
            with held(self._parent(root, parts, create=False)) as parent:
                if stat.S_ISDIR(lstat_at(parent, parts[-1], _shown(parts)).st_mode):
                    directory = open_dir(parent, parts[-1], create=False, shown=_shown(parts))
                    if directory is None:
                        raise Refused("not_found", f"{_shown(parts)} does not exist")
                    with held(directory):
                        return self._listing(directory, parts)
                lines = self._read_text(parent, parts).split("\n")
        first, last = 1, len(lines)
        if rng is not None:
            first, last = max(1, rng[0]), (len(lines) if rng[1] == -1 else min(rng[1], len(lines)))
        numbered = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(first, last + 1))
        return {"ok": True, "path": _shown(parts), "content": numbered}

    def _listing(self, directory: int, parts: list[str]) -> dict[str, Any]:
        hide_session = not parts and not self._session_scope
        entries = []
        for entry in list_dir(directory, is_temp_name):
            if hide_session and entry.name == _SESSION:
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
        data = self._encode(self._need(args, "file_text", str), in_session)
        root = self._open_root(create=True)
        if root is None:
            raise Refused("io_error", "the memories directory could not be created")
        with held(root), held(self._parent(root, parts, create=True)) as parent:
            self._replace(parent, parts, data)
        return {"ok": True, "path": _shown(parts), "status": "written"}

    def _edit(self, args: Mapping[str, Any], change: Any) -> dict[str, Any]:
        """Reads the file at ``path``, applies ``change(text) -> text`` and writes it back."""
        parts, in_session = self._locate(self._need(args, "path", str), write=True)
        if not parts:
            raise Refused("is_directory", "/memories is a directory")
        with (
            held(self._existing_root(parts)) as root,
            held(self._parent(root, parts, create=False)) as parent,
        ):
            text = change(self._read_text(parent, parts))
            self._replace(parent, parts, self._encode(text, in_session))
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
        if parts in ([], [_SESSION]):
            raise Refused("not_allowed", "the memory root and the session scope cannot be deleted")
        shown = _shown(parts)
        with (
            held(self._existing_root(parts)) as root,
            held(self._parent(root, parts, create=False)) as parent,
        ):
            mode = lstat_at(parent, parts[-1], shown).st_mode
            if stat.S_ISLNK(mode):
                raise Refused("invalid_path", f"{shown} is a symlink; symlinks are not touched")
            if stat.S_ISDIR(mode):
                remove_tree(parent, parts[-1], shown)
            else:
                # unlink never follows: a name swapped for a symlink loses only the name.
                os.unlink(parts[-1], dir_fd=parent)
            fsync(parent)
        return {"ok": True, "path": shown, "status": "deleted"}

    def _rename(self, args: Mapping[str, Any]) -> dict[str, Any]:
        old, _ = self._locate(self._need(args, "old_path", str), write=True)
        new, new_session = self._locate(self._need(args, "new_path", str), write=True)
        if old in ([], [_SESSION]) or not new:
            raise Refused("not_allowed", "the memory root and the session scope cannot be moved")
        if new[: len(old)] == old:
            raise Refused("invalid_path", "new_path must not be old_path or inside it")
        with (
            held(self._existing_root(old)) as root,
            held(self._parent(root, old, create=False)) as old_parent,
        ):
            st = lstat_at(old_parent, old[-1], _shown(old))
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise Refused(
                    "unsupported_file", f"{_shown(old)} is a symlink or special file; not moved"
                )
            if new_session:
                self._check_checkpoint_sizes(old_parent, old, st)
            with held(self._parent(root, new, create=True)) as new_parent:
                try:
                    rename_noreplace(old_parent, old[-1], new_parent, new[-1])
                except FileExistsError:
                    raise Refused("exists", f"{_shown(new)} already exists") from None
                fsync(new_parent)
            fsync(old_parent)
        return {"ok": True, "path": _shown(new), "status": "renamed"}

    @staticmethod
    def _check_checkpoint_sizes(parent: int, parts: list[str], st: os.stat_result) -> None:
        """Refuses a move into the session scope that would bring in a file over the
        checkpoint limit — the file itself or any file in a moved directory."""
        if stat.S_ISREG(st.st_mode):
            if st.st_size > CHECKPOINT_MAX:
                raise _too_large(True, st.st_size)
            return
        directory = open_dir(parent, parts[-1], create=False, shown=_shown(parts))
        if directory is None:
            raise Refused("not_found", f"{_shown(parts)} does not exist")
        with held(directory):
            big = oversized_file(directory, CHECKPOINT_MAX)
        if big is not None:
            raise Refused(
                "too_large",
                f"{_shown(parts)}/{big} is over {CHECKPOINT_MAX:,} bytes, the most a file in "
                "/memories/session/ may hold; shorten or move it elsewhere first",
            )
