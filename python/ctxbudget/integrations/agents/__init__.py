"""OpenAI Agents SDK integration (``pip install openai-agents``).

:class:`AgentsSession` implements the SDK's session protocol (``get_items``,
``add_items``, ``pop_item``, ``clear_session``, ``session_id``, ``session_settings``,
``close``) on top of a :class:`ctxbudget.Session`: the items are those of the active
context window. ``AgentsSession.open(session_id, workspace, model=...)`` is the one-line
swap for ``SQLiteSession(session_id, db_path)``, and
``AgentsSession.open(session_id, "postgresql://…", model=...)`` for the SDK's
``SQLAlchemySession`` (the conversation is the session id, shared by every host).
:meth:`AgentsSession.tools` gives ``session_history``, ``memory`` and ``new_context``
as the SDK's function tools, and
:meth:`AgentsSession.run_config` installs the model-input filter that runs
:meth:`ctxbudget.Session.prepare` before every model call, so advisories and rollovers
happen inside ``Runner.run`` and ``Runner.run_streamed``. The filter counts what the
running agent sends: its instructions (sent once) and every tool the SDK offers it —
function tools, MCP tools, handoffs, hosted tools. ``AgentsSession.open(...,
agent=agent)`` budgets for the agent's model; there is no default model.

The transcript stays append-only: ``pop_item`` appends a retraction row that hides the
item (nothing is rewritten), and ``clear_session`` is a soft clear — a privacy floor.
Each SDK item is stored once: its row's parts hold its text, tool calls and results, and
``meta.agents`` the rest, so it comes back exactly. A run writes only the items new in
it; what it held before a clear or a pop is never written again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .items import plain
from .session import AgentsSession, NotSentError, SessionClosedError

__all__ = ["AgentsSession", "NotSentError", "SessionClosedError", "sdk_items"]


def sdk_items(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Plain dicts of SDK items (for tests and logs)."""
    return [plain(i) for i in items]
