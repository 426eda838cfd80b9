"""Setup a DBA can run (docs/guide-deploy.md, "Setup"): the migration as an explicit step
(`ctxbudget db migrate`, `Database.migrate`), its SQL printable for review (`ctxbudget db
ddl`), the schema chosen by an argument, runtime roles with DML rights only and readers
with SELECT only, and the `Database` object a host owns (pool settings, close, no secret in
its repr or messages).

Each test works in a schema of its own and makes its roles in the test cluster (the test
server trusts local roles: no password is checked)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from history_helpers import msg, texts
from stores import quote, sql

from ctxbudget import (
    Database,
    DatabaseClosedError,
    DatabaseError,
    History,
    InvalidArgumentError,
    SchemaNotMigratedError,
    Session,
)
from ctxbudget.cli import main
from ctxbudget.database import ddl


def _schema(pg_url: str) -> str:
    schema = f"setup_{uuid.uuid4().hex[:12]}"
    sql(pg_url, f'CREATE SCHEMA "{schema}"')
    return schema


def _as_role(url: str, role: str, password: str = "") -> str:
    scheme, rest = url.split("://", 1)
    secret = f":{password}" if password else ""
    return f"{scheme}://{role}{secret}@{rest.rsplit('@', 1)[-1]}"


def _role(pg_url: str, schema: str, grants: str) -> str:
    """A login role with USAGE on the schema and ``grants`` on its tables; no CREATE."""
    role = f"role_{uuid.uuid4().hex[:12]}"
    sql(
        pg_url,
        f'CREATE ROLE "{role}" LOGIN; GRANT USAGE ON SCHEMA "{schema}" TO "{role}"; '
        f'GRANT {grants} ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"',
    )
    return role


def test_ddl_applied_by_hand_gives_a_current_schema(pg_url: str) -> None:
    schema = f"setup_{uuid.uuid4().hex[:12]}"
    text = ddl(schema)
    assert "CREATE TABLE ctxbudget_rows" in text and "COMMIT;" in text
    sql(pg_url, text)  # what a DBA runs after review
    with Database.open(pg_url, schema=schema, migrate=False) as db:
        assert db.schema_version == db.migrate()[1]
        h = db.history("c")
        h.append([msg("hello")])
        assert texts(h) == [(1, "hello")]


def test_cli_migrate_then_a_dml_role_runs_sessions_without_create(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _schema(pg_url)
    assert main(["db", "check", pg_url, "--schema", schema]) == 1
    assert "db migrate" in capsys.readouterr().err
    assert main(["db", "migrate", pg_url, "--schema", schema]) == 0
    assert "from schema version 0" in capsys.readouterr().out
    assert main(["db", "migrate", pg_url, "--schema", schema]) == 0  # idempotent
    assert "current" in capsys.readouterr().out
    role = _role(pg_url, schema, "SELECT, INSERT, UPDATE, DELETE")
    can_create = sql(
        pg_url, f"SELECT has_schema_privilege({quote(role)}, {quote(schema)}, 'CREATE')"
    )
    assert can_create == [["f"]]
    with Database.open(_as_role(pg_url, role), schema=schema, migrate=False, pool_size=2) as db:
        s = Session.open(database=db, conversation="chat", context_window=20_000)
        s.add_user("Audit the billing code.")
        assert s.prepare().status == "send"
        made = s.run_tool(
            "memory", {"command": "create", "path": "/memories/a.md", "file_text": "a"}
        )
        assert made["ok"], made
        h = db.history("chat")
        h.rollover(rollover_id="r", reason="usable_limit", lead_in="lead")
        h.append([msg("new window")])
        assert db.prune("chat", keep_windows=0).rows > 0
        report = db.delete("chat")
        assert report.existed and report.memory_files == 1
    counts = sql(
        pg_url,
        f'SELECT (SELECT count(*) FROM "{schema}".ctxbudget_rows) '
        f'+ (SELECT count(*) FROM "{schema}".ctxbudget_memory_files) '
        f'+ (SELECT count(*) FROM "{schema}".ctxbudget_conversations)',
    )
    assert counts == [["0"]]


def test_a_dml_role_on_an_unmigrated_database_is_told_to_migrate(pg_url: str) -> None:
    schema = _schema(pg_url)
    role = _role(pg_url, schema, "SELECT, INSERT, UPDATE, DELETE")
    with pytest.raises(SchemaNotMigratedError, match="ctxbudget db migrate") as raised:
        Database.open(_as_role(pg_url, role), schema=schema, migrate=False)
    assert (raised.value.found, raised.value.transient) == (0, False)
    # Nothing was created on its behalf.
    assert sql(pg_url, f"SELECT count(*) FROM pg_tables WHERE schemaname = {quote(schema)}") == [
        ["0"]
    ]


def test_a_read_only_role_reads_and_cannot_change_anything(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _schema(pg_url)
    with Database.open(pg_url, schema=schema) as owner:
        owner.history("kept").append([msg("keep me")])
    reader = _role(pg_url, schema, "SELECT")
    with Database.open(_as_role(pg_url, reader), schema=schema, migrate=False) as db:
        h = db.history("kept", create=False)
        assert texts(h) == [(1, "keep me")]
        with pytest.raises(DatabaseError):
            h.append([msg("not allowed")])
        with pytest.raises(DatabaseError):
            db.delete("kept")
        with pytest.raises(DatabaseError):
            db.history("new")  # creating a conversation is a write
    with Database.open(pg_url, schema=schema) as owner:
        assert texts(owner.history("kept")) == [(1, "keep me")]


def test_the_schema_argument_keeps_installations_apart(pg_url: str) -> None:
    a, b = _schema(pg_url), _schema(pg_url)
    with Database.open(pg_url, schema=a) as da, Database.open(pg_url, schema=b) as db:
        da.history("same-id").append([msg("in a")])
        db.history("same-id").append([msg("in b")])
        assert texts(da.history("same-id")) == [(1, "in a")]
        assert da.delete("same-id").existed
        assert texts(db.history("same-id")) == [(1, "in b")]


def test_a_database_is_closed_by_its_owner_and_never_shows_a_secret(pg_url: str) -> None:
    secret = "Zq8-unlikely-PW"
    url = _as_role(pg_url, "ctxbudget", secret)
    db = Database.open(
        url,
        pool_size=1,
        pool_timeout=5,
        connect_timeout=5,
        reconnect_for=1,
        statement_timeout=10,
        lock_timeout=5,
    )
    assert secret not in repr(db) and db.pool_size == 1
    h = db.history(f"c-{uuid.uuid4().hex}")
    h.append([msg("one")])
    with db:
        pass
    assert db.closed and "closed" in repr(db)
    with pytest.raises(DatabaseClosedError):
        db.history("other")
    with pytest.raises(DatabaseError) as raised:
        h.append([msg("after close")])
    assert secret not in str(raised.value)
    db.close()  # idempotent
    with pytest.raises(DatabaseError) as refused:
        Database.open(
            url.replace("127.0.0.1", "127.0.0.1").rsplit("/", 1)[0] + "/nosuchdb", reconnect_for=0
        )
    assert secret not in str(refused.value) and secret not in repr(refused.value)


def test_async_with_closes_the_database(pg_url: str) -> None:
    async def run() -> Database:
        async with Database.open(pg_url, pool_size=1) as db:
            db.history(f"c-{uuid.uuid4().hex}").append([msg("x")])
        return db

    assert asyncio.run(run()).closed


def test_history_open_takes_a_database(pg_url: str) -> None:
    with Database.open(pg_url) as db:
        h = History.open(db, conversation=f"c-{uuid.uuid4().hex}")
        h.append([msg("hi")])
        assert h.is_database and texts(h) == [(1, "hi")]


def test_every_session_kind_takes_a_database(pg_url: str) -> None:
    """``database=`` in place of the URL: Session, AsyncSession and AgentsSession all
    continue the same conversation of the host's pool."""
    from ctxbudget import AsyncSession

    conversation = f"c-{uuid.uuid4().hex}"
    with Database.open(pg_url, pool_size=2) as db:
        s = Session.open(database=db, conversation=conversation, context_window=20_000)
        s.add_user("first")

        async def more() -> int:
            a = await AsyncSession.open(
                database=db, conversation=conversation, context_window=20_000
            )
            await a.add_user("second")
            return len(texts(a.history))

        assert asyncio.run(more()) == 2
        with pytest.raises(InvalidArgumentError, match="not both"):
            Session.open(pg_url, database=db, conversation=conversation)
        pytest.importorskip("agents")
        from ctxbudget.integrations.agents import AgentsSession

        agents_session = AgentsSession.open(conversation, database=db, model="gpt-4o")
        assert agents_session.session_id == conversation
        assert [i["content"] for i in asyncio.run(agents_session.get_items())] == [
            "first",
            "second",
        ]
