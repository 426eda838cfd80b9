"""``ctxbudget db migrate|check|ddl``: the PostgreSQL schema as a DBA runs, checks and
reviews it (docs/guide-deploy.md, "Setup")."""

from __future__ import annotations

import argparse

from ._cli_errors import UsageError
from ._redact import redact
from .database import Database, ddl
from .errors import SchemaNotMigratedError
from .history import is_database_url, url_problem

__all__ = ["cmd_db"]


def cmd_db(args: argparse.Namespace) -> int:
    """Runs one ``ctxbudget db`` subcommand."""
    if args.db_command == "ddl":
        print(ddl(args.schema), end="")
        return 0
    if not is_database_url(args.url):
        raise UsageError(
            "ctxbudget db",
            url_problem(args.url) or f"expected a postgresql:// URL, got {args.url!r}",
        )
    where = f"schema {args.schema!r}" if args.schema else "the URL's search_path"
    try:
        with Database.open(args.url, schema=args.schema, pool_size=1, migrate=False) as db:
            print(redact(f"{where} holds ctxbudget schema version {db.schema_version}: current"))
            return 0
    except SchemaNotMigratedError as e:
        if args.db_command == "check":
            raise
        found = e.found
    with Database.open(args.url, schema=args.schema, pool_size=1, migrate=True) as db:
        print(redact(f"migrated {where} from schema version {found} to {db.schema_version}"))
    return 0
