"""``actrone-pg dsn``: print the DSN of the database, so that ``psql "$(actrone-pg dsn)"`` works."""

from __future__ import annotations

import argparse

from actrone_pg._cli._pg import add_connection_arguments, resolve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg dsn``."""
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Print the DSN (starting the embedded server if it has a cluster but is stopped)."""
    print(resolve(args).dsn)
    return 0
