"""A "host" for the multi-host PostgreSQL test: drives shared conversations with appends,
rollovers and session_history pages, and continues cursors other hosts left behind.

    python pg_history_host_worker.py URL CONVERSATIONS(comma-separated) HOST STEPS SEED CURSOR_DIR

Rollovers are decided as an application would decide them after reading the current
window: ``rollover_id = "after-<window>"``, so hosts that decide on the same window use
the same id and the window is sealed once. Every message is ``<host>:<step>``. A cursor
page this host starts is left in CURSOR_DIR for another host to continue; a continued
page that fails, repeats or reorders items ends the process with status 3. Prints the
number of messages appended.
"""

from __future__ import annotations

import json
import os
import random
import sys
import uuid
from pathlib import Path

from ctxbudget import History, SessionHistoryTool


def _msg(text: str) -> dict[str, object]:
    return {"kind": "message", "role": "user", "parts": [{"type": "text", "text": text}]}


def _continue_one(tools: dict[str, SessionHistoryTool], host: str, cursors: Path) -> None:
    for path in sorted(cursors.glob("*.json")):
        if path.name.startswith(f"{host}-"):
            continue
        mine = path.with_suffix(f".taken-by-{host}")
        try:
            os.rename(path, mine)  # one host takes it
        except FileNotFoundError:
            continue
        left = json.loads(mine.read_text())
        args = {**left["args"], "cursor": left["cursor"]}
        r = tools[left["conversation"]].call(args)
        if not r["ok"]:
            print(f"cursor from another host refused: {r}", file=sys.stderr)
            sys.exit(3)
        seqs = left["seqs"] + [int(i["item_id"]) for i in r["items"]]
        if seqs != sorted(set(seqs)):
            print(f"a continued page repeats or reorders items: {seqs}", file=sys.stderr)
            sys.exit(3)
        return


def main(
    url: str, conversations: list[str], host: str, steps: int, seed: int, cursors: Path
) -> None:
    rng = random.Random(seed)
    histories = {c: History.open(url, conversation=c) for c in conversations}
    tools = {c: SessionHistoryTool(h) for c, h in histories.items()}
    appended = 0
    for step in range(steps):
        conversation = rng.choice(conversations)
        h = histories[conversation]
        action = rng.random()
        if action < 0.6:
            h.append([_msg(f"{host}:{step}")])
            appended += 1
        elif action < 0.8:
            window = h.current_window
            h.rollover(rollover_id=f"after-{window}", reason="usable_limit", lead_in="go on")
        elif action < 0.9:
            args = {"action": "list_items", "limit": 3}
            r = tools[conversation].call(args)
            if r["ok"] and r.get("cursor"):
                left = {
                    "conversation": conversation,
                    "args": args,
                    "cursor": r["cursor"],
                    "seqs": [int(i["item_id"]) for i in r["items"]],
                }
                tmp = cursors / f".{uuid.uuid4().hex}"
                tmp.write_text(json.dumps(left))
                tmp.rename(cursors / f"{host}-{step}.json")
        else:
            _continue_one(tools, host, cursors)
    print(appended)


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2].split(","),
        sys.argv[3],
        int(sys.argv[4]),
        int(sys.argv[5]),
        Path(sys.argv[6]),
    )
