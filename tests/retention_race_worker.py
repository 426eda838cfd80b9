"""A writer racing a delete: appends to a conversation until the store says it was
deleted, then prints how it ended.

    python retention_race_worker.py URL CONVERSATION | WORKSPACE

Prints ``ready`` once its handle is open, then appends one row per call; prints
``deleted <appends>`` on ConversationDeletedError, ``error <class>: <message>`` on any
other error, ``done <appends>`` after 2000 appends.
"""

from __future__ import annotations

import sys

from ctxbudget import ConversationDeletedError, CtxBudgetError, History


def main(args: list[str]) -> None:
    if len(args) == 2:
        history = History.open(args[0], conversation=args[1])
    else:
        history = History.open(args[0], durability="none")
    print("ready", flush=True)
    row = {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "x"}]}
    for n in range(2000):
        try:
            history.append([row])
        except ConversationDeletedError:
            print(f"deleted {n}", flush=True)
            return
        except CtxBudgetError as e:
            print(f"error {type(e).__name__}: {e}", flush=True)
            return
    print("done 2000", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
