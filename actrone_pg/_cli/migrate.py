"""``actrone-pg migrate``: apply (or revert) the PostgreSQL schema migrations."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from actrone_pg._cli._pg import add_connection_arguments, connection_errors, resolve
from actrone_pg.errors import ConfigurationError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg migrate``."""
    add_connection_arguments(parser)
    parser.add_argument(
        "--revision", default=None, help="target revision (default: head, the newest)"
    )
    parser.add_argument(
        "--downgrade",
        action="store_true",
        help="downgrade to --revision, which is then required ('base' removes everything)",
    )
    parser.add_argument(
        "--distribute",
        action="store_true",
        help="on a Citus coordinator: distribute the schema by agent, moving existing rows to the "
        "workers (docs/scale-out.md, 'From one server')",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing: say whether the schema is at head (exit 0) or behind (exit 1)",
    )
    # run() reports a missing --revision the way argparse reports its own errors.
    parser.set_defaults(_parser_error=parser.error)


def run(args: argparse.Namespace) -> int:
    """Migrate; prints the revision before and after."""
    from actrone_pg import migrations

    if args.downgrade and not args.revision:
        # Downgrading "to head" would do nothing and say nothing: make the target explicit.
        args._parser_error(
            "--downgrade needs --revision: 'base' removes every actrone table, or one of "
            f"{', '.join(sorted(migrations.known_revisions()))} to go back to that revision"
        )
    if args.distribute and (args.downgrade or args.revision or args.check):
        args._parser_error(
            "--distribute migrates to head; it takes no --revision, --downgrade or --check"
        )
    if args.check and (args.downgrade or args.revision):
        args._parser_error("--check compares with head; it takes no --revision or --downgrade")
    revision = args.revision or "head"
    _check_revision(revision)
    # Only an upgrade may create the embedded cluster: the others would find nothing in a new one.
    target = resolve(args, create=not (args.downgrade or args.check))
    dsn, schema = target.dsn, target.schema
    if args.check:
        with connection_errors(dsn):
            current = migrations.current_revision(dsn, schema)
        head = migrations.head_revision()
        if current == head:
            print(f"schema {schema}: at {head}, the newest")
            return 0
        state = "empty" if current is None else f"at {current}"
        print(f"schema {schema}: {state}, the newest is {head}; run `actrone-pg migrate`")
        return 1
    with connection_errors(dsn), _revision_errors(revision):
        before = migrations.current_revision(dsn, schema)
        steps: list[str] = []
        refreshed: list[str] = []
        if args.downgrade:
            migrations.downgrade(dsn, schema, revision=revision)
        elif args.distribute:
            steps = migrations.distribute(
                dsn, schema, text_search_config=target.config.postgres_text_search_config
            )
        else:
            refreshed = migrations.migrate(
                dsn,
                schema,
                revision=revision,
                text_search_config=target.config.postgres_text_search_config,
                distribute=target.config.postgres_distribute,
            )
        after = migrations.current_revision(dsn, schema)
    print(f"schema {schema}: {before or 'empty'} -> {after or 'empty'}")
    if refreshed:
        print(f"schema {schema}: functions and views installed again from this version's files:")
    for difference in refreshed:
        print(f"  {difference}")
    for step in steps:
        print(f"  citus: {step}")
    if args.distribute and not steps:
        print(f"schema {schema}: distributed with Citus, nothing left to move")
    return 0


def _check_revision(revision: str) -> None:
    """Refuse a revision no shipped migration has before anything starts or connects.

    Names and ids Alembic resolves against the database (relative ``-1``, ``+2``, branch
    ``@`` forms) are left to Alembic, whose errors :func:`_revision_errors` maps.
    """
    from actrone_pg import migrations

    if revision in ("head", "heads", "base") or revision[:1] in "+-" or "@" in revision:
        return
    if not any(known.startswith(revision) for known in migrations.known_revisions()):
        raise _bad_revision(revision, f"Can't locate revision identified by {revision!r}")


@contextmanager
def _revision_errors(revision: str) -> Iterator[None]:
    """Alembic's errors about the target revision as a ConfigurationError of ``--revision``."""
    from alembic.util import CommandError

    try:
        yield
    except CommandError as exc:
        raise _bad_revision(revision, str(exc)) from None


def _bad_revision(revision: str, reason: str) -> ConfigurationError:
    from actrone_pg import migrations

    known = ", ".join(sorted(migrations.known_revisions()))
    return ConfigurationError(
        "--revision",
        f"{revision!r}: {' '.join(reason.split())} (known revisions: base, {known}, head)",
    )
