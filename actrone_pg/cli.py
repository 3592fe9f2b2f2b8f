"""The ``actrone-pg`` command line.

Each sub-command lives in its own module under ``actrone_pg/_cli/`` with two functions,
``add_arguments(parser)`` and ``run(args) -> int``, imported only when that command runs, so that
``actrone-pg demo`` does not import psycopg and ``actrone-pg calibrate`` does not import Redis.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from actrone_pg.errors import ActroneError

__all__ = ["main"]

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("actrone_pg.bench.command", "measure ingest, retrieval latency and candidate recall"),
    "calibrate": (
        "actrone_pg._cli.calibrate",
        "measure an embedder's relevance threshold on labelled query-memory pairs",
    ),
    "eval": ("actrone_pg._cli.eval", "measure evidence retrieval quality on conversations"),
    "demo": ("actrone_pg._cli.demo", "store a short conversation and show what retrieval picks"),
    "mcp": ("actrone_pg._cli.mcp", "serve memory to MCP clients over stdio or streamable HTTP"),
    "migrate": ("actrone_pg._cli.migrate", "apply the PostgreSQL schema migrations"),
    "reindex": ("actrone_pg._cli.reindex", "rebuild a store's BM25 terms with the text analyzer"),
    "inspect": ("actrone_pg._cli.inspect", "show sessions, recent turns and memories (PostgreSQL)"),
    "dsn": ("actrone_pg._cli.dsn", 'print the PostgreSQL DSN (for psql "$(actrone-pg dsn)")'),
    "sweep": ("actrone_pg._cli.sweep", "remove expired sessions and their turns"),
    "consolidate": ("actrone_pg._cli.consolidate", "turn sessions' turns into long-term memories"),
    "memories": ("actrone_pg._cli.memories", "list an agent's memories or one memory's versions"),
    "server": ("actrone_pg._cli.server", "show (status) or stop the embedded PostgreSQL server"),
    "export": (
        "actrone_pg._cli.export",
        "write an agent's memories (every version) and live sessions as JSON Lines",
    ),
    "import": ("actrone_pg._cli.import_", "load an export into the configured store"),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="actrone-pg",
        description="Memory for LLM agents, assembled inside a token budget.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        module.add_arguments(p)
        p.set_defaults(_module=module_name)
    return parser


#: Exit code of every command whose reader of stdout went away (``| head``): 0, silently. The
#: reader chose to stop reading, which is no failure of the command; and a short output that fit
#: in the pipe before the reader left never meets the closed pipe at all, so any other code would
#: depend on timing. Rich's own console would exit 1 (``actrone_pg._cli._output`` stops it).
BROKEN_PIPE = 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``actrone-pg``; returns the process exit code.

    A reader that closes stdout early (``actrone-pg memories list ... | head -1``) ends every
    command alike: quietly, exit code ``BROKEN_PIPE`` (0) and nothing on stderr, no traceback.
    """
    try:
        code = _main(argv)
        # Output still buffered would otherwise meet the closed pipe at interpreter exit, where
        # the error can only be printed ("Exception ignored ... BrokenPipeError").
        sys.stdout.flush()
    except BrokenPipeError:
        # Nothing more can reach the reader; point stdout at /dev/null so that the interpreter's
        # own flush at exit has somewhere to write.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE
    return code


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    module = importlib.import_module(args._module)
    try:
        code: int = module.run(args)
    except ActroneError as exc:
        # One line, whatever the message holds (libpq's, for one, adds a hint on a line of its
        # own).
        message = " ".join(str(exc).split())
        print(f"actrone-pg {args.command}: {type(exc).__name__}: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
