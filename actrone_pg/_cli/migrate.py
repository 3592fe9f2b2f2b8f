"""``actrone-pg migrate``: apply (or revert) the PostgreSQL schema migrations."""

from __future__ import annotations

import argparse

from actrone_pg._cli._pg import add_connection_arguments, resolve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg migrate``."""
    add_connection_arguments(parser)
    parser.add_argument(
        "--revision", default="head", help="target revision (default: head, the newest)"
    )
    parser.add_argument(
        "--downgrade", action="store_true", help="downgrade to --revision (e.g. 'base')"
    )


def run(args: argparse.Namespace) -> int:
    """Migrate; prints the revision before and after."""
    from actrone_pg import migrations

    dsn, schema = resolve(args)
    before = migrations.current_revision(dsn, schema)
    if args.downgrade:
        migrations.downgrade(dsn, schema, revision=args.revision)
    else:
        migrations.migrate(dsn, schema, revision=args.revision)
    after = migrations.current_revision(dsn, schema)
    print(f"schema {schema}: {before or 'empty'} -> {after or 'empty'}")
    return 0
