"""Worker process for the two-writers Session test: for each workspace it is sent, it
opens a Session, waits at the barrier with the other worker, calls prepare() once and
reports what the turn said."""

from __future__ import annotations

from typing import Any


def serve(jobs: Any, results: Any, barrier: Any) -> None:
    """Runs trials until it receives ``None``."""
    from ctxbudget import Session

    while True:
        ws = jobs.get()
        if ws is None:
            return
        s = Session.open(ws, model="gpt-4o", context_window=16_000, durability="none")
        barrier.wait()
        turn = s.prepare()
        results.put(
            {
                "status": turn.status,
                "events": turn.events,
                "window_id": turn.window_id,
                "previous_window_id": turn.previous_window_id,
            }
        )
