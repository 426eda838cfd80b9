"""What every framework integration shares: the error for a request not sent, and the
sessions of a framework's conversations (threads), one per conversation key."""

from __future__ import annotations

import os
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from ..aio import AsyncSession
from ..errors import CtxBudgetError
from ..history import backend_of
from ..session import Session, Turn

__all__ = ["Conversations", "NotSentError"]


class NotSentError(CtxBudgetError, RuntimeError):
    """``prepare()`` decided not to send (reject, block or pause); see ``turn``."""

    def __init__(self, turn: Turn) -> None:
        super().__init__(f"ctxbudget: request not sent ({turn.status}): {turn.reason}")
        self.turn = turn


class Conversations:
    """The :class:`~ctxbudget.Session` of each conversation a framework runs, opened on
    first use and kept: a workspace directory holds one conversation per key under
    ``threads/`` (the key percent-encoded, so any string is a safe folder name) and the
    keyless one in the directory itself; a ``postgresql://`` URL holds each as its
    ``conversation`` (the keyless one as ``conversation=``, by default ``"default"``).
    ``options`` go to :meth:`Session.open` for every conversation."""

    def __init__(self, workspace: str | os.PathLike[str], **options: Any) -> None:
        self._workspace = workspace
        self._conversation = options.pop("conversation", None)
        self._options = options
        self._sessions: dict[str | None, tuple[Session, AsyncSession]] = {}
        self._lock = threading.Lock()

    def _open(self, key: str | None) -> Session:
        kind = backend_of(self._workspace)
        if kind == "postgres":
            conversation = key if key is not None else (self._conversation or "default")
            return Session.open(self._workspace, conversation=conversation, **self._options)
        if key is None:
            return Session.open(self._workspace, **self._options)
        thread = urllib.parse.quote(key, safe="")
        if kind == "memory":  # one in-memory store per key, named under the keyless one's
            return Session.open(f"{self._workspace}/threads/{thread}", **self._options)
        return Session.open(Path(self._workspace) / "threads" / thread, **self._options)

    def pair(self, key: str | None) -> tuple[Session, AsyncSession]:
        """The conversation's session and its async face (opened on first use)."""
        with self._lock:
            found = self._sessions.get(key)
        if found is not None:
            return found
        session = self._open(key)  # outside the lock: opening reads the store
        with self._lock:
            return self._sessions.setdefault(key, (session, AsyncSession(session)))

    def session(self, key: str | None) -> Session:
        """The conversation's :class:`~ctxbudget.Session`."""
        return self.pair(key)[0]
