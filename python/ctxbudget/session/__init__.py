"""The agent-loop integration (:class:`Session`), in layers:

- :mod:`.loop` — the loop API a backend calls (open, record, ``prepare``, tools); the
  only module that writes, and the only one that reads the session's private state;
- :mod:`.state` — the window state as one object (fold, token accounting, request
  snapshot, what was sent) and the inputs a decision takes besides it;
- :mod:`.decide` — the decision: a function of the state and the inputs to a plan of
  one write and the turn that follows, tested without a store;
- :mod:`ctxbudget.window` — the window fold and the public :class:`WindowView`, the one
  reading of what the transcript's rows mean for the current window;
- :mod:`.accounting` — what a request counts, the one formula (also the plot's);
- :mod:`.anchoring` — how much of a count is exact, anchored (the provider's reported
  usage) and estimated, and the count-endpoint plug-in;
- :mod:`.steps` — the writes a decision asks for (advisory, rollover, quarantine,
  interrupted results), as values the session applies, each one conditional store
  operation;
- :mod:`.keyed` — recording a framework's message list by the messages' IDs, once;
- :mod:`.types` — the turn, hooks and constants.
"""

from __future__ import annotations

from ..window import OpenCall, WindowView
from .anchoring import CountRequest, PendingCount, RequestCounter
from .keyed import KeyedMessage, SyncReport
from .loop import Session
from .types import INTERRUPTED_OUTPUT, RequestHook, Turn, TurnStatus, context_window_for

__all__ = [
    "INTERRUPTED_OUTPUT",
    "CountRequest",
    "KeyedMessage",
    "OpenCall",
    "PendingCount",
    "RequestCounter",
    "RequestHook",
    "Session",
    "SyncReport",
    "Turn",
    "TurnStatus",
    "WindowView",
    "context_window_for",
]
