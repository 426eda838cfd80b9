"""One connection pool per URL per process, however many threads open their first
PostgreSQL ``History`` of that URL at once."""

from __future__ import annotations

import threading
import uuid

from stores import quote, sql, with_app_name

from ctxbudget import History

POOL_SIZE = 8  # PgOptions::default().pool_size


def test_threads_opening_a_url_at_once_share_one_pool(pg_url: str) -> None:
    name = f"pool-{uuid.uuid4().hex[:12]}"
    url = with_app_name(pg_url, name)
    barrier = threading.Barrier(24)
    opened: list[History] = []
    errors: list[BaseException] = []

    def open_and_read(i: int) -> None:
        try:
            barrier.wait()
            h = History.open(url, conversation=f"{name}-{i}")
            h.append(
                [{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "x"}]}]
            )
            opened.append(h)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=open_and_read, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(opened) == 24
    rows = sql(
        pg_url,
        f"SELECT count(*) FROM pg_stat_activity WHERE application_name = {quote(name)}",
    )
    assert int(rows[0][0]) <= POOL_SIZE, f"{rows[0][0]} connections for one URL"
