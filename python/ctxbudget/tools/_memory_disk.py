"""The memory files of a workspace: ``<workspace>/memories/`` on disk.

Every file operation goes through :mod:`.._confined`: paths are resolved from an open
descriptor of ``memories/`` one component at a time without following symlinks, so a
symlink swapped in while a command runs cannot lead outside (see docs/concepts.md,
"Memory tool security model"). Writes are atomic (a temporary file, flushed, renamed).
The ``memory`` tool's commands (:mod:`.memory`) decide everything else.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from .._atomic import atomic_write_at, fsync, is_temp_name
from .._confined import (
    Entry,
    Refused,
    held,
    list_dir,
    longest_path,
    lstat_at,
    open_dir,
    open_tree,
    oversized_file,
    read_regular,
    remove_tree,
    rename_noreplace,
    walk,
)
from ._memory_paths import CHECKPOINT_MAX, FILE_MAX, PATH_MAX, shown, too_large

__all__ = ["DiskMemory"]


class DiskMemory:
    """``<workspace>/memories/``, confined to that directory."""

    __slots__ = ("_workspace",)

    def __init__(self, workspace: Path) -> None:
        self._workspace = workspace

    @property
    def root(self) -> Path:
        return self._workspace / "memories"

    def where(self) -> str:
        return str(self.root)

    # ----- directories ---------------------------------------------------------------

    def _open_root(self, *, create: bool) -> int | None:
        return open_tree(self._workspace, "memories", create=create)

    def _existing_root(self, parts: list[str]) -> int:
        root = self._open_root(create=False)
        if root is None:
            raise Refused("not_found", f"{shown(parts)} does not exist")
        return root

    @staticmethod
    def _parent(root: int, parts: list[str], *, create: bool) -> int:
        """The open directory holding ``parts[-1]``."""
        return walk(root, parts[:-1], create=create, shown=lambda n: shown(parts, n))

    @staticmethod
    def _read_text(parent: int, parts: list[str]) -> str:
        return read_regular(parent, parts[-1], FILE_MAX, shown(parts)).decode("utf-8", "replace")

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
                raise Refused("is_directory", f"{shown(parts)} is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise Refused(
                    "unsupported_file",
                    f"{shown(parts)} is a symlink or special file; delete it first",
                )
        # Whatever the name holds by now, the rename replaces the name, never a target.
        atomic_write_at(parent, name, data)

    # ----- the store's operations ----------------------------------------------------

    def view(self, parts: list[str]) -> list[Entry] | str:
        """The entries of the directory ``parts`` (the root: ``[]`` while it does not
        exist), or the text of the file ``parts``."""
        root = self._open_root(create=False)
        if root is None:
            if not parts:
                return []
            raise Refused("not_found", f"{shown(parts)} does not exist")
        with held(root):
            if not parts:
                return list_dir(root, is_temp_name)
            with held(self._parent(root, parts, create=False)) as parent:
                if stat.S_ISDIR(lstat_at(parent, parts[-1], shown(parts)).st_mode):
                    directory = open_dir(parent, parts[-1], create=False, shown=shown(parts))
                    if directory is None:
                        raise Refused("not_found", f"{shown(parts)} does not exist")
                    with held(directory):
                        return list_dir(directory, is_temp_name)
                return self._read_text(parent, parts)

    def write(self, parts: list[str], data: bytes) -> None:
        """Creates or replaces the file ``parts`` (and the directories above it)."""
        root = self._open_root(create=True)
        if root is None:
            raise Refused("io_error", "the memories directory could not be created")
        with held(root), held(self._parent(root, parts, create=True)) as parent:
            self._replace(parent, parts, data)

    def update(self, parts: list[str], change: Callable[[str], bytes]) -> None:
        """Replaces the existing file ``parts`` with ``change(its text)``."""
        with (
            held(self._existing_root(parts)) as root,
            held(self._parent(root, parts, create=False)) as parent,
        ):
            self._replace(parent, parts, change(self._read_text(parent, parts)))

    def delete(self, parts: list[str]) -> None:
        """Deletes the file or directory ``parts`` (never following a symlink)."""
        where = shown(parts)
        with (
            held(self._existing_root(parts)) as root,
            held(self._parent(root, parts, create=False)) as parent,
        ):
            mode = lstat_at(parent, parts[-1], where).st_mode
            if stat.S_ISLNK(mode):
                raise Refused("invalid_path", f"{where} is a symlink; symlinks are not touched")
            if stat.S_ISDIR(mode):
                remove_tree(parent, parts[-1], where)
            else:
                # unlink never follows: a name swapped for a symlink loses only the name.
                os.unlink(parts[-1], dir_fd=parent)
            fsync(parent)

    def rename(self, old: list[str], new: list[str], *, into_session: bool) -> None:
        """Moves ``old`` to ``new`` (which must not exist); ``into_session`` refuses a
        file over the checkpoint limit. Refusals come in the order both stores use:
        ``not_found``, ``too_large``, ``invalid_path`` (a moved path would grow past the
        limit), ``not_a_directory``, ``exists``."""
        with (
            held(self._existing_root(old)) as root,
            held(self._parent(root, old, create=False)) as old_parent,
        ):
            st = lstat_at(old_parent, old[-1], shown(old))
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise Refused(
                    "unsupported_file", f"{shown(old)} is a symlink or special file; not moved"
                )
            if into_session:
                self._check_checkpoint_sizes(old_parent, old, st)
            if stat.S_ISDIR(st.st_mode):
                self._check_moved_paths(old_parent, old, new)
            with held(self._parent(root, new, create=True)) as new_parent:
                try:
                    rename_noreplace(old_parent, old[-1], new_parent, new[-1])
                except FileExistsError:
                    raise Refused("exists", f"{shown(new)} already exists") from None
                fsync(new_parent)
            fsync(old_parent)

    @staticmethod
    def _check_moved_paths(parent: int, old: list[str], new: list[str]) -> None:
        """Refuses moving the directory ``old`` to ``new`` when a path in it would grow
        past the path limit (nothing could name it afterwards)."""
        directory = open_dir(parent, old[-1], create=False, shown=shown(old))
        if directory is None:
            raise Refused("not_found", f"{shown(old)} does not exist")
        with held(directory):
            longest = longest_path(directory)
        grown = len(os.fsencode(shown(new))) + (1 + longest if longest else 0)
        if grown > PATH_MAX:
            raise Refused(
                "invalid_path",
                f"the move would give a file a path of {grown} bytes, over the "
                f"{PATH_MAX}-byte limit; choose a shorter new_path",
            )

    @staticmethod
    def _check_checkpoint_sizes(parent: int, parts: list[str], st: os.stat_result) -> None:
        """Refuses a move into the session scope that would bring in a file over the
        checkpoint limit — the file itself or any file in a moved directory."""
        if stat.S_ISREG(st.st_mode):
            if st.st_size > CHECKPOINT_MAX:
                raise too_large(True, st.st_size)
            return
        directory = open_dir(parent, parts[-1], create=False, shown=shown(parts))
        if directory is None:
            raise Refused("not_found", f"{shown(parts)} does not exist")
        with held(directory):
            big = oversized_file(directory, CHECKPOINT_MAX)
        if big is not None:
            raise Refused(
                "too_large",
                f"{shown(parts)}/{big} is over {CHECKPOINT_MAX:,} bytes, the most a file in "
                "/memories/session/ may hold; shorten or move it elsewhere first",
            )
