"""Server CPU of one append statement, measured on its backend: the one-statement
append as it was (lock with ``SELECT … FOR UPDATE``, insert, update the counters) beside
the update-first form (``rust/ctxbudget/src/pg/transcript/fast.rs``), a bare two-row
insert with ``synchronous_commit`` on and off (what a durable commit costs by itself),
and, with ``--breakdown``, the update-first append in scratch schemas that lack the rows'
foreign key, the counters' guard trigger, then also the CHECK constraints and the insert
trigger (what each guarantee costs; never a proposal to drop them).

    python benches/experiments/pg_append_cpu.py [--appends N] [--rounds R] [--breakdown]

Needs the server that ``scripts/pg-cluster start`` printed, on this machine
(``CTXBUDGET_PG_SOCKET_URL``: the backend's CPU is read from ``/proc``), the schema
migrated (any ctxbudget run against it does that), psycopg
(``benches/requirements-pg.txt``) and, for ``--breakdown``, the ``ctxbudget`` CLI (it
prints the DDL). One connection, autocommit, server-side prepared statements; each
append writes two ~1 KiB rows to a conversation of its own. CPU is counted in clock
ticks: read differences under ~0.02 ms as noise. Timing only: it never fails.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

TICK = os.sysconf("SC_CLK_TCK")
BODY = b'{"kind":"message","role":"user","parts":[{"type":"text","text":"' + b"x" * 900 + b'"}]}'

_ROWS = """INSERT INTO ctxbudget_rows (conversation, seq, body, floor, batch_id, batch_last)
       SELECT c.conversation, t.s, t.b, t.f,
              CASE WHEN t.s = $5::int8 THEN $6::text END,
              CASE WHEN t.s = $5::int8 THEN $7::int8 END
       FROM c, unnest($2::int8[], $3::bytea[], $4::bool[]) AS t(s, b, f)"""

LOCK_FIRST = f"""WITH c AS (
       SELECT conversation, set_config('ctxbudget.appending', conversation, true) AS mark
       FROM ctxbudget_conversations
       WHERE conversation = $1 AND epoch = $9::int8 AND last_seq = $10::int8 FOR UPDATE),
     ins AS ({_ROWS} RETURNING 1)
     UPDATE ctxbudget_conversations
     SET last_seq = $7::int8, floor_seq = GREATEST(floor_seq, $8::int8)
     WHERE conversation = $1 AND (SELECT count(*) FROM ins) = $11::int8 RETURNING epoch"""

UPDATE_FIRST = f"""WITH c AS (
       UPDATE ctxbudget_conversations
       SET last_seq = $7::int8, floor_seq = GREATEST(floor_seq, $8::int8)
       WHERE conversation = $1 AND epoch = $9::int8 AND last_seq = $10::int8
       RETURNING conversation, epoch,
                 set_config('ctxbudget.appending', conversation, true) AS mark),
     ins AS ({_ROWS})
     SELECT epoch FROM c"""

BREAKDOWN = {
    "bench_full": ("full schema", []),
    "bench_no_fk": (
        "without the rows' foreign key",
        ["ALTER TABLE ctxbudget_rows DROP CONSTRAINT ctxbudget_rows_conversation_fkey"],
    ),
    "bench_no_fk_guard": (
        "... and without the counters' guard trigger",
        [
            "ALTER TABLE ctxbudget_rows DROP CONSTRAINT ctxbudget_rows_conversation_fkey",
            "DROP TRIGGER ctxbudget_conversation_guard ON ctxbudget_conversations",
        ],
    ),
    "bench_bare": (
        "... and without CHECK constraints and the insert trigger",
        [
            "ALTER TABLE ctxbudget_rows DROP CONSTRAINT ctxbudget_rows_conversation_fkey",
            "DROP TRIGGER ctxbudget_conversation_guard ON ctxbudget_conversations",
            "DROP TRIGGER ctxbudget_rows_inserted ON ctxbudget_rows",
            """DO $$ DECLARE r record; BEGIN
                 FOR r IN SELECT conrelid::regclass AS t, conname FROM pg_constraint
                          WHERE contype = 'c' AND connamespace = current_schema()::regnamespace
                 LOOP EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.t, r.conname);
                 END LOOP; END $$""",
        ],
    ),
}


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one(cursor: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The one row a query answers."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the query answered no row")
    return tuple(row)


def named(sql: str) -> str:
    """``$n`` placeholders as psycopg's named ones."""
    return re.sub(r"\$(\d+)", lambda m: "%(p" + m.group(1) + ")s", sql)


def with_schema(url: str, schema: str | None) -> str:
    if schema is None:
        return url
    return url + ("&" if "?" in url else "?") + f"options=-csearch_path%3D{schema}"


def appends(url: str, sql: str, n: int) -> float:
    """Backend CPU (ms) per append of two rows by ``sql``."""
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        pid = one(conn.execute("SELECT pg_backend_pid()"))[0]
        conversation = f"bench-append-cpu-{secrets.token_hex(6)}"
        conn.execute(
            "INSERT INTO ctxbudget_conversations (conversation) VALUES (%s)", (conversation,)
        )
        epoch, last = one(
            conn.execute(
                "SELECT epoch, last_seq FROM ctxbudget_conversations WHERE conversation = %s",
                (conversation,),
            )
        )
        query = named(sql)
        before = backend_cpu(pid)
        for _ in range(n):
            first = last + 1
            params: dict[str, Any] = {
                "p1": conversation,
                "p2": [first, first + 1],
                "p3": [BODY, BODY],
                "p4": [False, False],
                "p5": first,
                "p6": secrets.token_hex(8),
                "p7": first + 1,
                "p8": 0,
                "p9": epoch,
                "p10": last,
                "p11": 2,
            }
            written = conn.execute(query, params).fetchall()
            assert written and written[0][0] == epoch, written
            last = first + 1
        return (backend_cpu(pid) - before) / n * 1e3


def bare_inserts(url: str, n: int, synchronous_commit: str) -> float:
    """Backend CPU (ms) per two-row insert into a table with a primary key alone."""
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        pid = one(conn.execute("SELECT pg_backend_pid()"))[0]
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_bare_rows "
            "(conversation text, seq int8, body bytea, PRIMARY KEY (conversation, seq))"
        )
        conn.execute(f"SET synchronous_commit = {synchronous_commit}")
        key = secrets.token_hex(6)
        before = backend_cpu(pid)
        for i in range(n):
            conn.execute(
                "INSERT INTO bench_bare_rows SELECT %s, t.s, t.b "
                "FROM unnest(%s::int8[], %s::bytea[]) AS t(s, b)",
                (key, [2 * i, 2 * i + 1], [BODY, BODY]),
            )
        spent = (backend_cpu(pid) - before) / n * 1e3
        conn.execute("DROP TABLE bench_bare_rows")
        return spent


def make_schemas(url: str) -> None:
    for schema, (_, changes) in BREAKDOWN.items():
        ddl = subprocess.run(
            [sys.executable, "-m", "ctxbudget", "db", "ddl", "--schema", schema],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(ddl.encode())
        with psycopg.connect(with_schema(url, schema), autocommit=True) as conn:
            for change in changes:
                conn.execute(change.encode())


def drop_schemas(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in BREAKDOWN:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--breakdown", action="store_true")
    args = parser.parse_args()
    url = os.environ.get("CTXBUDGET_PG_SOCKET_URL")
    if not url:
        print('CTXBUDGET_PG_SOCKET_URL is not set (eval "$(scripts/pg-cluster start)")')
        return 0
    if args.breakdown:
        make_schemas(url)
    try:
        for r in range(args.rounds):
            for label, sql in (("lock first (before)", LOCK_FIRST), ("update first", UPDATE_FIRST)):
                ms = appends(url, sql, args.appends)
                print(f"round {r}  append, {label:40s} {ms:.3f} ms", flush=True)
            for sc in ("on", "off"):
                ms = bare_inserts(url, args.appends, sc)
                print(f"round {r}  bare insert, synchronous_commit={sc:3s}{'':17s} {ms:.3f} ms")
            if args.breakdown:
                for schema, (label, _) in BREAKDOWN.items():
                    ms = appends(with_schema(url, schema), UPDATE_FIRST, args.appends)
                    print(f"round {r}  update first, {label:58s} {ms:.3f} ms", flush=True)
    finally:
        if args.breakdown:
            drop_schemas(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
