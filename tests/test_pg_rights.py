"""The rights a PostgreSQL role needs (docs/guide-deploy.md, "Rights"): once the tables
exist, a role with only ``SELECT, INSERT, UPDATE, DELETE`` on them runs sessions, and a
role with only ``SELECT`` runs the CLI's readers (``ctxbudget history list|items|search|
read|verify|export --store URL``). Neither needs ``CREATE`` on the schema (PostgreSQL 15
grants none on ``public``).

Each test installs the tables in a schema of its own (chosen by the URL's
``search_path``) as the server's superuser, then connects as a role made for it (the test
server trusts local roles: no password)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from history_helpers import fill_two_windows
from stores import sql

from ctxbudget import DatabaseError, History, Session
from ctxbudget.cli import main


def _in_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def _as_role(url: str, role: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{role}@{rest.rsplit('@', 1)[-1]}"


def _installed(pg_url: str) -> tuple[str, str]:
    """A schema holding ctxbudget's tables (and a conversation ``kept`` with two
    windows), installed by the superuser: ``(schema, its URL)``."""
    schema = f"rights_{uuid.uuid4().hex[:12]}"
    sql(pg_url, f'CREATE SCHEMA "{schema}"')
    url = _in_schema(pg_url, schema)
    fill_two_windows(History.open(url, conversation="kept"))
    return schema, url


def _role(pg_url: str, schema: str, grants: str) -> str:
    role = f"role_{uuid.uuid4().hex[:12]}"
    sql(
        pg_url,
        f'CREATE ROLE "{role}" LOGIN; GRANT USAGE ON SCHEMA "{schema}" TO "{role}"; '
        f'GRANT {grants} ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"',
    )
    return role


def test_a_role_with_dml_rights_runs_a_session(pg_url: str) -> None:
    schema, url = _installed(pg_url)
    role = _role(pg_url, schema, "SELECT, INSERT, UPDATE, DELETE")
    s = Session.open(_as_role(url, role), conversation="chat", context_window=20_000)
    s.add_user("Audit the billing code.")
    assert s.prepare().status == "send"
    made = s.run_tool(
        "memory", {"command": "create", "path": "/memories/session/cp.md", "file_text": "a"}
    )
    replace = {"command": "str_replace", "old_str": "a", "new_str": "b"}
    edited = s.run_tool("memory", {**replace, "path": "/memories/session/cp.md"})
    assert made["ok"] and edited["ok"], (made, edited)
    page = s.run_tool("session_history", {"action": "list_windows"})
    assert page["ok"], page
    assert s.history.verify().ok


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["items", "--window", "w:0"],
        ["search", "DEPLOY"],
        ["read", "1"],
        ["verify"],
        ["export"],
    ],
    ids=lambda c: c[0],
)
def test_a_role_with_select_only_runs_the_readers(
    pg_url: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    schema, url = _installed(pg_url)
    reader = _as_role(url, _role(pg_url, schema, "SELECT"))
    name, *rest = command
    code = main(["history", name, "--store", reader, "--conversation", "kept", *rest])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip()


def test_a_role_that_cannot_migrate_is_told_which_right_it_lacks(
    pg_url: str, tmp_path: Path
) -> None:
    """No tables yet, and a role without CREATE on the schema: a typed error naming the
    right, not the server's refusal of a CREATE TABLE it did not need to see."""
    schema = f"rights_{uuid.uuid4().hex[:12]}"
    sql(pg_url, f'CREATE SCHEMA "{schema}"')
    role = _role(pg_url, schema, "SELECT")
    with pytest.raises(DatabaseError, match="CREATE") as raised:
        History.open(_as_role(_in_schema(pg_url, schema), role), conversation="x")
    assert schema in str(raised.value) and not raised.value.transient
