"""The exceptions ctxbudget raises, rooted at :class:`CtxBudgetError`.

Each class also derives from the builtin that fits it, so ``except ValueError`` keeps
working for callers that do not know ctxbudget. The Rust binding raises these very
classes (it looks them up here), so there is one hierarchy for both layers.
"""

from __future__ import annotations

__all__ = [
    "ConflictError",
    "ConversationDeletedError",
    "CorruptHistoryError",
    "CtxBudgetError",
    "DatabaseClosedError",
    "DatabaseError",
    "HistoryIOError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidJsonError",
    "InvalidRowError",
    "LockTimeoutError",
    "LoopAffinityError",
    "MediaError",
    "MessageChangedError",
    "PolicyError",
    "SchemaNotMigratedError",
    "SettingsError",
    "TokenizerError",
    "UnknownEncodingError",
    "UnknownModelError",
]


class CtxBudgetError(Exception):
    """Base class of every error raised by ctxbudget."""


class UnknownEncodingError(CtxBudgetError, ValueError):
    """The encoding name is not one ctxbudget ships.

    Attributes: ``name`` (what was asked for), ``known`` (the valid names).
    """

    name: str
    known: list[str]


class UnknownModelError(CtxBudgetError, ValueError):
    """No tokenizer is known for the model; pass an explicit encoding instead.

    Attribute: ``model``.
    """

    model: str


class InvalidJsonError(CtxBudgetError, ValueError):
    """Input to ``count_json`` is not valid JSON (or not JSON-serializable).

    Attributes: ``line`` and ``column`` (1-based) when the text failed to parse.
    """

    line: int
    column: int


class TokenizerError(CtxBudgetError, RuntimeError):
    """The tokenizer could not produce a count (a bug: please report the input).

    Raised instead of crashing the interpreter or guessing from characters.
    """


class MediaError(CtxBudgetError, ValueError):
    """An image's size cannot be read from its bytes (not PNG, JPEG, GIF or WebP, a
    damaged or cut-short header, or not a base64 ``data:`` URL)."""


class InvalidArgumentError(CtxBudgetError, ValueError):
    """An argument is outside what the call accepts; the message says which and why."""


class MessageChangedError(CtxBudgetError, ValueError):
    """A framework's message says something else than the message already recorded
    under its ID (:meth:`Session.sync_messages <ctxbudget.Session.sync_messages>`).
    Nothing was recorded; the message says what to do.

    Attributes: ``key`` (the message's ID) and ``seq`` (the row recorded under it, or
    ``None`` when the list itself gave the ID twice).
    """

    key: str
    seq: int | None

    def __init__(self, message: str, *, key: str, seq: int | None) -> None:
        super().__init__(message)
        self.key = key
        self.seq = seq


class InvalidRowError(CtxBudgetError, ValueError):
    """A row given to the transcript store is malformed.

    Attributes: ``index`` (position in the batch) and ``field`` (e.g. ``parts[2].type``).
    """

    index: int
    field: str


class LockTimeoutError(CtxBudgetError, TimeoutError):
    """Another writer held the history lock longer than the wait bound.

    Attributes: ``path`` (the lock file) and ``waited`` (seconds).
    """

    path: str
    waited: float


class CorruptHistoryError(CtxBudgetError, OSError):
    """The transcript is damaged before its last valid commit; writes are refused.

    Nothing is rewritten to "repair" it. Attributes: ``path``, ``offset``, ``line``.
    """

    path: str
    offset: int
    line: int


class ConflictError(CtxBudgetError, RuntimeError):
    """A conditional write (``if_last_seq=``) found that another writer appended first.

    Nothing was written. Read the new rows and decide again. Attributes:
    ``expected_last_seq`` (what the decision was based on) and ``last_seq`` (the store's
    last seq now).
    """

    expected_last_seq: int
    last_seq: int


class HistoryIOError(CtxBudgetError, OSError):
    """A filesystem operation of the transcript store failed (``errno``, ``filename``).

    The message names the operation, the file and what to do about the error.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else super().__str__()


class DatabaseError(CtxBudgetError, ConnectionError):
    """The PostgreSQL store failed: the server could not be reached, the connection
    broke, TLS refused the server, or the server refused a statement.

    The message names what failed and what to do. ``transient`` is true when the server
    could not be reached or the connection broke: retrying may succeed (a conditional
    append, ``if_last_seq=``, retried commits at most once).
    """

    transient: bool


class SchemaNotMigratedError(DatabaseError):
    """The database does not hold this library's schema (or an older one) and the
    :class:`~ctxbudget.Database` was opened with ``migrate=False`` (a runtime role
    without ``CREATE``). Nothing was changed: run the migration once, as the role that
    owns the tables (``ctxbudget db migrate URL`` or :meth:`~ctxbudget.Database.migrate`).

    Attributes: ``found`` (the version the database holds, 0: none), ``needed``.
    """

    found: int
    needed: int


class DatabaseClosedError(DatabaseError):
    """The :class:`~ctxbudget.Database` was closed by its owner; nothing was done."""


class ConversationDeletedError(CtxBudgetError, RuntimeError):
    """The conversation (a workspace's transcript or a PostgreSQL conversation) was
    deleted for good while this handle was open; nothing was written. Opening it again
    starts a new, empty conversation under the same name."""


class LoopAffinityError(CtxBudgetError, RuntimeError):
    """A session was used in a way that would wait forever for an awaited call: a
    thread called the :class:`~ctxbudget.Session` directly while an
    :class:`~ctxbudget.AsyncSession` call of the event loop that thread runs held it,
    or used the session while a call of a loop stopped on that thread (not closed) was
    in flight. Nothing was done; await the call instead, and run a stopped loop until
    its calls finish (closing it abandons them)."""


class InternalError(CtxBudgetError, RuntimeError):
    """A bug inside the Rust core (a caught panic); the message names the call.

    Nothing was half-done on its account: the store was left as it was. Please report it.
    """


class PolicyError(CtxBudgetError, ValueError):
    """A budget, threshold or tool-policy argument is invalid; the message names it."""


class SettingsError(CtxBudgetError, ValueError):
    """A settings file or value is invalid. Attribute ``field`` names the offending field;
    ``path`` the file, when one was read. The file itself is left untouched."""

    field: str
    path: str | None
