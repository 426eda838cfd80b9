"""The agent-loop integration (:class:`Session`), in layers:

- :mod:`.loop` — the loop API a backend calls (open, record, ``prepare``, tools);
- :mod:`ctxbudget.window` — the window fold and the public :class:`WindowView`, the one
  reading of what the transcript's rows mean for the current window;
- :mod:`.accounting` — what a request counts, the one formula (also the plot's);
- :mod:`.anchoring` — how much of a count is exact, anchored (the provider's reported
  usage) and estimated, and the count-endpoint plug-in;
- :mod:`.steps` — the writes ``prepare`` decides on (advisory, rollover, quarantine,
  interrupted results), each one conditional store operation;
- :mod:`.keyed` — recording a framework's message list by the messages' IDs, once;
- :mod:`.types` — the turn, hooks and constants.
"""

from __future__ import annotations

from ..window import OpenCall, WindowView
from .anchoring import CountRequest, RequestCounter
from .keyed import KeyedMessage, SyncReport
from .loop import Session
from .types import INTERRUPTED_OUTPUT, RequestHook, Turn, context_window_for

__all__ = [
    "INTERRUPTED_OUTPUT",
    "CountRequest",
    "KeyedMessage",
    "OpenCall",
    "RequestCounter",
    "RequestHook",
    "Session",
    "SyncReport",
    "Turn",
    "WindowView",
    "context_window_for",
]
