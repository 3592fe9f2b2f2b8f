"""How every command prints: one console type, and tables that read at 80 columns and in a pipe.

``console()`` is rich's console except on a closed pipe: rich ends the process itself there
(``SystemExit(1)``), which would make ``actrone-pg inspect | head`` end otherwise than a command
that prints with ``print``; here the ``BrokenPipeError`` goes up to ``actrone_pg.cli.main``,
which ends every command alike.

``table()`` draws without vertical rules (two spaces between columns instead of three
characters), so that more of the width goes to the text. Columns added with ``key_column`` (ids
and other keys) never wrap and never lose a character; ``text_column`` (content, messages) takes
the width left and wraps at word boundaries.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["console", "key_column", "short_time", "table", "text_column"]


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def console(**kwargs: Any) -> Console:
    """A rich console whose closed pipe raises ``BrokenPipeError`` (see the module docstring)."""
    return _Console(**kwargs)


def table(title: str | None = None, *, leading: int = 0) -> Table:
    """A table with a rule under its header and no vertical rules or edges; ``leading=1`` puts a
    blank line between rows (for rows of several lines)."""
    return Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title_justify="left",
        leading=leading,
        min_width=len(title or ""),  # a title is never wrapped by an empty or narrow table
    )


def key_column(t: Table, header: str, **kwargs: Any) -> None:
    """A column whose values stay whole on one line (ids, versions, dates)."""
    t.add_column(header, no_wrap=True, overflow="ignore", **kwargs)


def text_column(t: Table, header: str, **kwargs: Any) -> None:
    """A column that takes the width the others leave and wraps its text."""
    t.add_column(header, min_width=16, overflow="fold", **kwargs)


def short_time(value: datetime | None) -> str:
    """``2026-12-04 09:30`` in the value's own zone (UTC for stored times); ``""`` for none."""
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""
