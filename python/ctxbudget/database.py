"""A PostgreSQL database the host owns: opened once with its pool settings, handed to
:class:`~ctxbudget.History`, :class:`~ctxbudget.Session`,
:class:`~ctxbudget.AsyncSession` and ``AgentsSession`` (``database=``), and closed.

``History.open("postgresql://…", conversation=…)`` stays the simple form (one pool of 8
per URL per process, the schema migrated on first connect). A :class:`Database` is the
form for production: the pool sized per worker, timeouts the host chooses, a schema named
by argument, migration an explicit step (``migrate=False`` for runtime roles that have
only ``SELECT, INSERT, UPDATE, DELETE``; docs/guide-deploy.md).
"""

from __future__ import annotations

from types import TracebackType

from . import _ctxbudget
from ._redact import redact
from .errors import InvalidArgumentError
from .history import DEFAULT_MAX_ROW_BYTES, History, is_database_url, url_problem

__all__ = ["Database", "DeleteReport", "PruneReport", "ddl"]

DeleteReport = _ctxbudget.DeleteReport
PruneReport = _ctxbudget.PruneReport


def ddl(schema: str | None = None) -> str:
    """The SQL the migration runs on an empty database, for a DBA to review or run by
    hand (``ctxbudget db ddl``), in ``schema`` when one is named."""
    return _ctxbudget.pg_ddl(schema)


def _seconds(name: str, value: float | None, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgumentError(f"{name} must be a number of seconds >= 0, got {value!r}")
    return float(value)


class Database:
    """A connected PostgreSQL database with a pool of its own. Thread-safe; share one per
    process (or per worker). Close it with :meth:`close`, ``with`` or ``async with``:
    later calls of this object raise :class:`~ctxbudget.DatabaseClosedError`, those of
    every history or session opened from it a :class:`~ctxbudget.DatabaseError` saying
    so. Its ``repr`` and messages never show the
    URL's password.
    """

    __slots__ = ("_core",)

    def __init__(self, core: _ctxbudget.Database) -> None:
        self._core = core

    @classmethod
    def open(
        cls,
        url: str,
        *,
        pool_size: int = 8,
        pool_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        reconnect_for: float = 30.0,
        statement_timeout: float | None = None,
        lock_timeout: float | None = None,
        schema: str | None = None,
        migrate: bool = True,
        cursor_key: str | None = None,
    ) -> Database:
        """Connects to the ``postgresql://`` database at ``url``.

        ``pool_size`` connections at most (size it per worker process: the server's
        ``max_connections`` is shared by every worker of every host); a call waits at most
        ``pool_timeout`` seconds for a free one, ``connect_timeout`` for the server to
        accept one, and keeps reconnecting for ``reconnect_for`` seconds while the server
        restarts (0: no retry). ``statement_timeout`` and ``lock_timeout`` (seconds;
        ``None``: the server's) are set on every connection. TLS is the URL's
        ``sslmode``/``sslrootcert``. ``schema`` names the PostgreSQL schema holding the
        tables. With ``migrate=True`` (the simple case) a missing or older schema is
        created or migrated now; with ``migrate=False`` (a runtime role without
        ``CREATE``) it is only checked, and :class:`~ctxbudget.SchemaNotMigratedError`
        says to run ``ctxbudget db migrate`` first. ``cursor_key`` signs
        ``session_history`` cursors (else ``CTXBUDGET_CURSOR_KEY``, else the key kept in
        the database).
        """
        if not is_database_url(url):
            problem = url_problem(url)
            raise InvalidArgumentError(
                problem or redact(f"Database.open needs a postgresql:// URL, got {url!r}")
            )
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidArgumentError(f"pool_size must be an int >= 1, got {pool_size!r}")
        if schema is not None and (not isinstance(schema, str) or not schema):
            raise InvalidArgumentError(f"schema must be a non-empty str, got {schema!r}")
        core = _ctxbudget.Database.open(
            url,
            pool_size=pool_size,
            pool_timeout=_seconds("pool_timeout", pool_timeout) or 0.0,
            connect_timeout=_seconds("connect_timeout", connect_timeout) or 0.0,
            reconnect_for=_seconds("reconnect_for", reconnect_for) or 0.0,
            statement_timeout=_seconds("statement_timeout", statement_timeout, optional=True),
            lock_timeout=_seconds("lock_timeout", lock_timeout, optional=True),
            schema=schema,
            migrate=bool(migrate),
            cursor_key=cursor_key,
        )
        return cls(core)

    def history(
        self,
        conversation: str,
        *,
        max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
        create: bool = True,
    ) -> History:
        """The conversation ``conversation`` (created unless ``create=False``, when one
        that does not exist is an :class:`~ctxbudget.InvalidArgumentError`)."""
        return History.open(
            self, conversation=conversation, max_row_bytes=max_row_bytes, create=create
        )

    def delete(self, conversation: str) -> DeleteReport:
        """Deletes ``conversation`` for good: its rows, memory files and counters, in one
        transaction, after any append in flight has committed. Reports what was removed
        (``existed=False``: there was none). Handles still open on it fail on their next
        write with :class:`~ctxbudget.ConversationDeletedError`; opening the id again
        starts an empty conversation (docs/decisions.md)."""
        _check_conversation(conversation)
        return self._core.delete(conversation)

    def prune(
        self,
        conversation: str,
        *,
        keep_windows: int | None = None,
        older_than: float | None = None,
        below_floor: bool = False,
    ) -> PruneReport:
        """:meth:`History.prune` of ``conversation`` (which must exist)."""
        _check_conversation(conversation)
        return self._core.prune(
            conversation,
            keep_windows=keep_windows,
            older_than=_seconds("older_than", older_than, optional=True),
            below_floor=bool(below_floor),
        )

    def migrate(self) -> tuple[int, int]:
        """Creates or migrates the schema (as the role that owns the tables): the
        version found before (0: none) and the version now. Safe when many hosts run it
        at once; a current database is only read."""
        found, now = self._core.migrate()
        return found, now

    @property
    def schema_version(self) -> int:
        """The schema version the database holds."""
        return self._core.schema_version()

    @property
    def pool_size(self) -> int:
        """Most connections the pool opens."""
        return self._core.pool_size

    @property
    def schema(self) -> str | None:
        """The schema named at open (``None``: the connection's ``search_path``)."""
        return self._core.schema

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._core.closed

    def close(self) -> None:
        """Closes the pool's idle connections now and the others as their calls end;
        every later call raises :class:`~ctxbudget.DatabaseClosedError` (a history or
        session opened from it: :class:`~ctxbudget.DatabaseError`). Idempotent."""
        self._core.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Database:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Imported here: `import ctxbudget` does not load asyncio (and ssl, which it
        # imports), megabytes that a host which never awaits would carry.
        import asyncio

        # Closing sockets may block briefly: off the event loop.
        await asyncio.to_thread(self.close)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<ctxbudget.Database schema={self.schema!r} pool_size={self.pool_size} {state}>"


def _check_conversation(conversation: object) -> None:
    if not isinstance(conversation, str) or not conversation:
        raise InvalidArgumentError(
            f"conversation must be a non-empty str (1 to 256 bytes), got {conversation!r}"
        )
