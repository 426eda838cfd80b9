"""The async face of :class:`~ctxbudget.Session` for asyncio backends.

Every method that reads or writes the transcript or counts tokens runs the very same
:class:`~ctxbudget.Session` method in a worker thread (``asyncio.to_thread``, or the
executor you pass), so the event loop never waits for an ``fdatasync``, a cold tokenizer
load or a count. There is one implementation of the loop logic: this class only moves
calls off the loop. The store and the tokenizer release the GIL while they work, and the
session's lock serializes calls on one conversation, so many conversations proceed
concurrently and calls on one conversation apply in the order they were awaited.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, ParamSpec, TypeVar

from .history import History
from .policy import Budget
from .session import OpenCall, RequestHook, Session, Turn
from .tokens import Encoding

__all__ = ["AsyncSession"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


async def _off_loop(
    executor: Executor | None, fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs
) -> _R:
    # Imported here: `import ctxbudget` should not pay for asyncio (a third of its import
    # time) in the many programs that never await it; a running loop has it loaded.
    import asyncio

    if executor is None:
        return await asyncio.to_thread(fn, *args, **kwargs)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))


class AsyncSession:
    """A :class:`~ctxbudget.Session` whose I/O and counting run off the event loop.

    Open it with ``await AsyncSession.open(workspace, **options)`` (the options of
    :meth:`Session.open`), or wrap an existing session. ``executor`` bounds the worker
    threads (default: asyncio's default executor).

    .. code-block:: python

        s = await AsyncSession.open("ws", model="gpt-4o", tools=my_tools)
        await s.add_user("Fix the nightly export")
        turn = await s.prepare()
    """

    __slots__ = ("_executor", "_session")

    def __init__(self, session: Session, *, executor: Executor | None = None) -> None:
        if not isinstance(session, Session):
            raise TypeError(f"AsyncSession wraps a Session, got {type(session).__name__}")
        self._session = session
        self._executor = executor

    @classmethod
    async def open(
        cls,
        workspace: str | os.PathLike[str],
        *,
        executor: Executor | None = None,
        **options: Any,
    ) -> AsyncSession:
        """Opens the session off the loop (the first tokenizer load of a process can
        take a while); ``options`` are those of :meth:`Session.open`."""
        session = await _off_loop(executor, Session.open, workspace, **options)
        return cls(session, executor=executor)

    @property
    def session(self) -> Session:
        """The underlying synchronous session (for its attributes and tools)."""
        return self._session

    @property
    def history(self) -> History:
        """The transcript store."""
        return self._session.history

    @property
    def budget(self) -> Budget:
        """The token budget."""
        return self._session.budget

    @property
    def encoding(self) -> Encoding:
        """The encoding that counts the requests."""
        return self._session.encoding

    @property
    def window_id(self) -> str:
        """The current window."""
        return self._session.window_id

    @property
    def previous_window_id(self) -> str | None:
        """The window before the current one."""
        return self._session.previous_window_id

    @property
    def settled(self) -> bool:
        """True when every tool call of the window has its result."""
        return self._session.settled

    @property
    def open_calls(self) -> list[OpenCall]:
        """Tool calls of the current window without a result."""
        return self._session.open_calls

    def register_hook(self, fn: Callable[..., Any], *, context_only: bool) -> RequestHook:
        """See :meth:`Session.register_hook` (hooks run in the worker thread)."""
        return self._session.register_hook(fn, context_only=context_only)

    def unregister_hook(self, hook: RequestHook) -> None:
        """See :meth:`Session.unregister_hook`."""
        self._session.unregister_hook(hook)

    async def prepare(self) -> Turn:
        """See :meth:`Session.prepare`."""
        return await _off_loop(self._executor, self._session.prepare)

    async def add_user(self, content: str | Sequence[Mapping[str, Any]]) -> str:
        """See :meth:`Session.add_user`."""
        return await _off_loop(self._executor, self._session.add_user, content)

    async def add_assistant(
        self, text: str | None = None, tool_calls: Sequence[Mapping[str, Any]] = ()
    ) -> str:
        """See :meth:`Session.add_assistant`."""
        return await _off_loop(self._executor, self._session.add_assistant, text, tool_calls)

    async def add_assistant_from_openai(self, message: Any) -> str:
        """See :meth:`Session.add_assistant_from_openai`."""
        return await _off_loop(self._executor, self._session.add_assistant_from_openai, message)

    async def add_assistant_from_openai_responses(self, response: Any) -> str:
        """See :meth:`Session.add_assistant_from_openai_responses`."""
        return await _off_loop(
            self._executor, self._session.add_assistant_from_openai_responses, response
        )

    async def add_assistant_from_anthropic(self, message: Any) -> str:
        """See :meth:`Session.add_assistant_from_anthropic`."""
        return await _off_loop(self._executor, self._session.add_assistant_from_anthropic, message)

    async def run_tool(
        self, name: str, arguments: Mapping[str, Any] | str | None
    ) -> dict[str, Any]:
        """See :meth:`Session.run_tool`."""
        return await _off_loop(self._executor, self._session.run_tool, name, arguments)

    async def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> None:
        """See :meth:`Session.add_tool_results`."""
        await _off_loop(self._executor, self._session.add_tool_results, results)

    async def interrupt_open_calls(self) -> list[OpenCall]:
        """See :meth:`Session.interrupt_open_calls`."""
        return await _off_loop(self._executor, self._session.interrupt_open_calls)

    async def refresh(self) -> None:
        """See :meth:`Session.refresh`."""
        await _off_loop(self._executor, self._session.refresh)

    async def count_request(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
    ) -> int:
        """See :meth:`Session.count_request`."""
        return await _off_loop(self._executor, self._session.count_request, system, messages, tools)

    def __repr__(self) -> str:
        return f"Async{self._session!r}"
