"""A string that looks like a URL (``scheme://…``) or a libpq connection string and is not
a ``postgresql://``/``postgres://`` URL is a typed error at every entry point, naming
the accepted forms, redacted — never a local directory named after it (password
included). ``postgresql+asyncpg://`` and the other SQLAlchemy driver forms are refused
with a message saying to drop the driver (docs/decisions.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxbudget import AsyncSession, History, InvalidArgumentError, MemoryTool, Session
from ctxbudget.cli import main
from ctxbudget.history import is_database_url, url_problem, workspace_path

SECRET = "Yk2-s3cr3t-PW"

NOT_SUPPORTED = [
    f"postgresql+asyncpg://app:{SECRET}@db:5432/app",
    f"postgresql+psycopg://app:{SECRET}@db/app",
    f"postgresql+psycopg2://app:{SECRET}@db/app?sslmode=require",
    f"postgres+asyncpg://app:{SECRET}@db/app",
    f"POSTGRESQL://app:{SECRET}@db/app",
    f"mysql://root:{SECRET}@localhost/x",
    f"sqlite:///tmp/x.db?password={SECRET}",
    f"redis://:{SECRET}@cache:6379/0",
    f"http://app:{SECRET}@example.invalid/x",
    f"host=db user=app password={SECRET} dbname=app",
    f"dbname=app password='{SECRET}'",
    f" postgresql://app:{SECRET}@db/app\n",
    f"  postgresql+asyncpg://app:{SECRET}@db/app",
]


def _entry_points() -> dict[str, Callable[[str], object]]:
    async def open_async(target: str) -> AsyncSession:
        return await AsyncSession.open(target, model="gpt-4o")

    points: dict[str, Callable[[str], object]] = {
        "History.open": History.open,
        "History.open(conversation=)": lambda t: History.open(t, conversation="c1"),
        "Session.open": lambda t: Session.open(t, model="gpt-4o"),
        "Session.open(conversation=)": lambda t: Session.open(t, conversation="c1", model="gpt-4o"),
        "AsyncSession.open": lambda t: asyncio.run(open_async(t)),
        "MemoryTool": MemoryTool,
        "workspace_path": workspace_path,
    }
    try:
        from ctxbudget.integrations.agents import AgentsSession
    except ImportError:
        return points
    points["AgentsSession.open"] = lambda t: AgentsSession.open("s1", t, model="gpt-4o")
    return points


@pytest.mark.parametrize("target", NOT_SUPPORTED)
@pytest.mark.parametrize("entry", sorted(_entry_points()))
def test_a_url_that_is_not_postgresql_is_an_error_not_a_directory(
    entry: str, target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError) as err:
        _entry_points()[entry](target)
    message = str(err.value)
    assert SECRET not in message and SECRET not in repr(err.value)
    assert "postgresql://user@host:port/database" in message or "spaces" in message, message
    assert list(tmp_path.iterdir()) == [], "nothing is created"
    if "+" in target.split("://")[0]:
        driver = target.split("://")[0].split("+")[1]
        assert f"drop +{driver}" in message


def test_a_path_object_of_a_url_is_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Path() folds the `//` of a URL; it must not become a directory either.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError):
        History.open(Path(f"postgresql+asyncpg://app:{SECRET}@db/app"))
    with pytest.raises(InvalidArgumentError):
        History.open(Path(f"postgresql://app:{SECRET}@db/app"))
    assert list(tmp_path.iterdir()) == []


def test_plain_paths_stay_workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("ws", "a:b", "postgres", "hosts=1", f"./postgresql+asyncpg://x:{SECRET}@h"):
        assert url_problem(name) is None, name
        assert not is_database_url(name)
    History.open("./postgresql+asyncpg://u@h/db", durability="none")  # the escape hatch
    assert (tmp_path / "postgresql+asyncpg:" / "u@h" / "db" / "history").is_dir()
    assert is_database_url("postgresql://u@h/db") and is_database_url("postgres://u@h/db")
    assert url_problem("postgresql://u@h/db") is None


@pytest.mark.parametrize("target", NOT_SUPPORTED[:4] + NOT_SUPPORTED[-4:])
@pytest.mark.parametrize(
    "argv",
    [
        ["history", "list", "{t}"],
        ["history", "verify", "{t}", "--conversation", "c1"],
        ["history", "list", "--store", "{t}", "--conversation", "c1"],
        ["plot", "{t}"],
        ["demo", "--workspace", "{t}", "--steps", "1"],
    ],
    ids=lambda a: "-".join(a[:2]) if isinstance(a, list) else None,
)
def test_cli_refuses_them_with_exit_2(
    argv: list[str],
    target: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main([a.format(t=target) for a in argv])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2, err
    assert SECRET not in out + err
    assert len(err.strip().splitlines()) == 1 and "postgresql://" in err
    assert list(tmp_path.iterdir()) == [], os.listdir(tmp_path)


def test_a_postgresql_url_where_a_directory_is_needed_says_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for target in (f"postgresql://app:{SECRET}@db/app", f"postgres://app@db/app?password={SECRET}"):
        with pytest.raises(InvalidArgumentError, match=r"History\.open\(url, conversation=") as e:
            MemoryTool(target)
        assert SECRET not in str(e.value)
    assert list(tmp_path.iterdir()) == []
