"""A load worker for the PostgreSQL fault tests: appends numbered batches to one
conversation and logs each acknowledged one.

    python pg_append_worker.py URL CONVERSATION WORKER BATCHES ACK_LOG

Batch ``n`` holds ``1 + n % 3`` rows with the texts ``<worker>:<n>:<i>/<size>``. After an
append returns, ``n first_seq last_seq`` is written to ACK_LOG and flushed (a SIGKILL
after that keeps the line). A transient ``DatabaseError`` (the server stayed away longer
than the store retries) leaves the outcome unknown: as an application would, the worker
reads the rows back, logs the batch if it is there and appends it again otherwise.
"""

from __future__ import annotations

import sys
import time

from ctxbudget import DatabaseError, History


def batch_texts(worker: str, n: int) -> list[str]:
    size = 1 + n % 3
    return [f"{worker}:{n}:{i}/{size}" for i in range(size)]


def _find(history: History, first_text: str) -> tuple[int, int] | None:
    rows = [r for r in history.rows() if r.parts and r.parts[0].get("text") == first_text]
    if not rows:
        return None
    size = int(first_text.rsplit("/", 1)[1])
    return rows[0].seq, rows[0].seq + size - 1


def main(url: str, conversation: str, worker: str, batches: int, ack_log: str) -> None:
    history = History.open(url, conversation=conversation)
    with open(ack_log, "a", encoding="utf-8") as log:
        for n in range(batches):
            texts = batch_texts(worker, n)
            rows = [
                {"kind": "message", "role": "user", "parts": [{"type": "text", "text": t}]}
                for t in texts
            ]
            while True:
                try:
                    r = history.append(rows)
                    acked = (r.first_seq, r.last_seq)
                    break
                except DatabaseError as e:
                    if not e.transient:
                        raise
                    time.sleep(0.5)
                    try:
                        found = _find(history, texts[0])
                    except DatabaseError:
                        continue
                    if found is not None:
                        acked = found
                        break
            log.write(f"{n} {acked[0]} {acked[1]}\n")
            log.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
