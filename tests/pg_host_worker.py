"""Worker process for the several-hosts PostgreSQL test: each process is one host. For
every job it is sent it opens the conversation with its own ``Session`` (its own
connection pool), waits at the barrier with the other hosts when the job says so, does
the job and reports what it saw."""

from __future__ import annotations

from typing import Any

WINDOW = 16_000


def _open(url: str, conversation: str) -> Any:
    from ctxbudget import Session

    return Session.open(url, conversation=conversation, model="gpt-4o", context_window=WINDOW)


def _prepare(job: dict[str, Any], barrier: Any) -> dict[str, Any]:
    s = _open(job["url"], job["conversation"])
    barrier.wait()
    turn = s.prepare()
    return {
        "status": turn.status,
        "events": turn.events,
        "window_id": turn.window_id,
        "previous_window_id": turn.previous_window_id,
    }


def _drive(job: dict[str, Any], barrier: Any) -> dict[str, Any]:
    """A stubborn agent's steps: a long user message, prepare, a short reply — past
    every threshold and the usable limit, so advisories and forced rollovers happen
    while the other hosts step the same conversation."""
    s = _open(job["url"], job["conversation"])
    barrier.wait()
    statuses: list[str] = []
    for step in range(job["steps"]):
        s.add_user(f"host {job['host']} step {step}: " + job["text"])
        turn = s.prepare()
        statuses.append(turn.status)
        s.add_assistant(f"host {job['host']} read step {step}")
    return {"statuses": statuses, "window_id": s.window_id}


def _record(job: dict[str, Any], barrier: Any) -> dict[str, Any]:
    """Records a result for call ``c1`` at the same moment as the other hosts."""
    from ctxbudget import InvalidArgumentError, Session

    s = Session.open(job["url"], conversation=job["conversation"], open_calls="wait")
    barrier.wait()
    try:
        s.add_tool_results([{"call_id": "c1", "name": "read_file", "output": str(job["host"])}])
    except InvalidArgumentError:
        return {"outcome": "refused"}
    return {"outcome": "recorded"}


def _page(job: dict[str, Any], barrier: Any) -> dict[str, Any]:
    """One ``session_history`` call (with the cursor another host handed over)."""
    s = _open(job["url"], job["conversation"])
    result: dict[str, Any] = s.run_tool("session_history", job["args"])
    return result


def serve(host: int, jobs: Any, results: Any, barrier: Any) -> None:
    """Runs the jobs of its own queue until it receives ``None``; an exception is
    reported, not raised."""
    ops = {"prepare": _prepare, "drive": _drive, "record": _record, "page": _page}
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            results.put({"host": host, **ops[job["op"]]({**job, "host": host}, barrier)})
        except Exception as exc:  # reported to the test, which fails with it
            results.put({"host": host, "exception": f"{type(exc).__name__}: {exc}"})
