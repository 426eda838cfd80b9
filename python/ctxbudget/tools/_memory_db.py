"""The memory files of a PostgreSQL conversation (rows of ``ctxbudget_memory_files``) or
of an in-memory store: never a file-system path.

The core (``PgConversation::memory_*``) keeps the paths, limits and the conversation's
row lock, so a write, an edit, a rename or a delete is one transaction that never
interleaves with another host's. A directory exists while some file lies under it. The
``memory`` tool's commands (:mod:`.memory`) decide everything else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _ctxbudget
from .._confined import Entry, Refused
from .._memory_backend import MemoryFiles
from ..errors import InvalidArgumentError
from ..history import History
from ._memory_paths import shown

__all__ = ["DatabaseMemory"]


def _refused(exc: InvalidArgumentError) -> Refused | InvalidArgumentError:
    """The core's refusal (it carries the tool's ``code``) as the tool's."""
    code = getattr(exc, "code", None)
    return Refused(code, str(exc)) if isinstance(code, str) else exc


class DatabaseMemory:
    """The memory files of one PostgreSQL conversation or in-memory store."""

    __slots__ = ("_files", "_where")

    def __init__(self, history: History) -> None:
        name = history.memory_name
        self._files: Any
        if name is not None:
            self._files = MemoryFiles(name)
            self._where = f"the memory files of in-memory store {name!r}"
        else:
            self._files = _ctxbudget.PgMemoryFiles(history._core)
            self._where = f"the memory files of postgresql conversation {history.conversation!r}"

    def where(self) -> str:
        return self._where

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        try:
            return method(*args)
        except InvalidArgumentError as exc:
            raise _refused(exc) from None

    def _at(self, parts: list[str], method: Callable[..., Any], *args: Any) -> Any:
        """``method(*args)`` on the path ``parts``; a path that does not exist because
        it lies under a file is ``not_a_directory``, as it is on disk."""
        try:
            return self._call(method, *args)
        except Refused as refused:
            if refused.code == "not_found":
                self._check_no_file_above(parts)
            raise

    def _check_no_file_above(self, parts: list[str]) -> None:
        for n in range(1, len(parts)):
            try:
                self._call(self._files.read, shown(parts, n))
            except Refused:
                continue
            raise Refused(
                "not_a_directory", f"{shown(parts, n)} is a file, so {shown(parts)} is not in it"
            )

    def view(self, parts: list[str]) -> list[Entry] | str:
        """The entries of the directory ``parts`` (the root always exists), or the text
        of the file ``parts``."""
        if parts:
            try:
                data = self._at(parts, self._files.read, shown(parts))
                return bytes(data).decode("utf-8", "replace")
            except Refused as refused:
                if refused.code != "is_directory":
                    raise
        prefix = shown(parts) + "/"
        return [
            Entry(path[len(prefix) :], is_dir, 0 if is_dir else size)
            for path, is_dir, size in self._call(self._files.entries, shown(parts))
        ]

    def write(self, parts: list[str], data: bytes) -> None:
        self._call(self._files.write, shown(parts), data)

    def update(self, parts: list[str], change: Callable[[str], bytes]) -> None:
        self._at(
            parts,
            self._files.update,
            shown(parts),
            lambda old: change(bytes(old).decode("utf-8", "replace")),
        )

    def delete(self, parts: list[str]) -> None:
        self._at(parts, self._files.delete, shown(parts))

    def rename(self, old: list[str], new: list[str], *, into_session: bool) -> None:
        # The core refuses a file over the checkpoint limit moving into the session
        # scope itself, under the same lock as the move.
        del into_session
        self._at(old, self._files.rename, shown(old), shown(new))
