"""The transcript stores (a workspace's files, PostgreSQL, in-memory) behind one test
handle, and hand-written SQL for the PostgreSQL store's tests (through ``psql``, so that
no database driver is needed)."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from ctxbudget import DeleteReport, History

STORE_KINDS = ("file", "postgres", "memory")

# Options that only the file store has.
_FILE_ONLY = ("durability", "lock_timeout", "recover")


def new_conversation_id(prefix: str = "t") -> str:
    """A conversation id no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex}"


class StoreUnderTest:
    """A test's store: ``open()`` opens its main location (a workspace directory or a
    conversation), ``fresh()`` names another one, ``open(where)`` opens that."""

    def __init__(self, kind: str, tmp_path: Path, url: str | None) -> None:
        self.kind = kind
        self.url = url
        self._tmp = tmp_path
        self._count = 0
        self.main = self.fresh()

    @property
    def is_pg(self) -> bool:
        return self.kind == "postgres"

    @property
    def shares_across_processes(self) -> bool:
        """Whether another process can open the same conversation (an in-memory store
        lives in one process only). Tests that need it say so with
        ``@pytest.mark.store_needs("shares_across_processes")``."""
        return self.kind != "memory"

    @property
    def has_files(self) -> bool:
        """Whether the transcript is files of a workspace directory (``history/``)."""
        return self.kind == "file"

    def delete(self, where: str | None = None) -> DeleteReport:
        """``History.delete`` of the location ``where`` (default: the main one)."""
        where = self.main if where is None else where
        if self.is_pg:
            assert self.url is not None
            return History.delete(self.url, conversation=where)
        return History.delete(where)

    def cli_args(self, where: str | None = None) -> list[str]:
        """How ``ctxbudget history …`` names the location ``where`` (in this process)."""
        where = self.main if where is None else where
        return ["--store", self.url or "", "--conversation", where] if self.is_pg else [where]

    def session_location(self, where: str | None = None) -> dict[str, Any]:
        """The arguments of ``Session.open`` that name the location ``where``."""
        where = self.main if where is None else where
        if self.is_pg:
            return {"workspace": self.url, "conversation": where}
        if self.has_files:
            return {"workspace": Path(where), "durability": "none"}
        return {"workspace": where}

    def fresh(self) -> str:
        """A new, empty location: a directory under the test's tmp_path, a new
        conversation id, or a new in-memory store's ``memory:NAME``."""
        self._count += 1
        if self.is_pg:
            return new_conversation_id()
        if self.kind == "memory":
            return f"memory:{new_conversation_id()}"
        return str(self._tmp / f"ws-{self._count}")

    def open(self, where: str | None = None, **options: Any) -> History:
        where = self.main if where is None else where
        if self.is_pg:
            assert self.url is not None
            pg = {k: v for k, v in options.items() if k not in _FILE_ONLY}
            return History.open(self.url, conversation=where, **pg)
        if self.kind == "memory":
            return History.open(where, **{k: v for k, v in options.items() if k not in _FILE_ONLY})
        options.setdefault("durability", "none")
        return History.open(where, **options)

    def target_args(self, where: str | None = None) -> list[str]:
        """Command-line arguments naming the location for a worker process:
        ``[workspace]`` or ``[url, conversation]`` (``[memory:NAME]``: a store of the
        worker's own, unless :attr:`shares_across_processes`)."""
        where = self.main if where is None else where
        return [self.url, where] if self.is_pg else [where]  # type: ignore[list-item]


def open_target(args: list[str]) -> History:
    """The History a worker process was given by :meth:`StoreUnderTest.target_args`."""
    if len(args) == 2:
        return History.open(args[0], conversation=args[1])
    return History.open(args[0], durability="none")


def with_app_name(url: str, name: str) -> str:
    """``url`` with ``application_name=name``: its own connection pool in this process (a
    pool per URL), and connections the server can pick out in ``pg_stat_activity``."""
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


def terminate(url: str, name: str) -> int:
    """Has the server drop every connection whose application_name is ``name`` (an SQL
    LIKE pattern); returns how many."""
    rows = sql(
        url,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        f"WHERE application_name LIKE {quote(name)} AND pid <> pg_backend_pid()",
    )
    return int(rows[0][0])


def _psql() -> str:
    found = shutil.which("psql")
    if found:
        return found
    bindir = subprocess.run(
        ["pg_config", "--bindir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return str(Path(bindir) / "psql")


def sql(url: str, statement: str) -> list[list[str]]:
    """Runs ``statement`` (hand-written SQL, as an operator would) and returns the rows of
    its last result as text; raises ``SqlError`` with the server's message."""
    out = subprocess.run(
        [_psql(), "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d", url],
        input=statement,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:
        raise SqlError(out.stderr.strip())
    return [line.split("\t") for line in out.stdout.splitlines() if line]


def quote(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


class SqlError(Exception):
    """The server refused hand-written SQL."""


class Psql:
    """An interactive psql session, for holding a transaction open while the code under
    test runs."""

    def __init__(self, url: str) -> None:
        self._proc = subprocess.Popen(
            [_psql(), "-X", "-q", "-A", "-t", "-F", "\t", "-d", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, statement: str) -> list[str]:
        """Runs ``statement`` and returns its output lines (errors included)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        marker = f"__done_{uuid.uuid4().hex}__"
        self._proc.stdin.write(statement.rstrip().rstrip(";") + ";\n\\echo " + marker + "\n")
        self._proc.stdin.flush()
        lines: list[str] = []
        for line in self._proc.stdout:
            if line.strip() == marker:
                return lines
            lines.append(line.rstrip("\n"))
        raise RuntimeError(f"psql ended while running {statement!r}: {lines}")

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
