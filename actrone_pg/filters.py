"""The filters of a search or a listing (spec §9.3), each key defined once.

A key is one :class:`FilterKey` in :data:`FILTERS`: its name, how a caller's value is checked
(``parse``), what it means for one memory (``matches``, the reference every backend is tested
against), and its compilers: the mask over the in-memory store's columns (``mask``), the
condition on a PostgreSQL row ``m`` (``sql``, with ``{value}`` where its one bound parameter
goes) and, where Qdrant evaluates it exactly as ``matches`` does, the payload conditions it is
pushed down as (``qdrant``). Everything else derives from the registry: the manager's validation
(:func:`parse_filters`), the MCP tool's schema, the CLI's options, the SQL ``WHERE``
(``stores.postgres.builders``) and the Qdrant query filter (``stores.redis_qdrant.layout``).

The filter applies before ranking: the BM25 statistics (N, total length, document frequencies)
are those of the agent's memories that match it (:func:`filtered_stats`), and only they are
candidates. Adding a key: a :class:`FilterKey` here (or :func:`register` for one of your own),
and a test (docs/architecture.md, "A new filter key").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from actrone_pg import _validation as v
from actrone_pg.errors import ValidationError
from actrone_pg.models import Memory
from actrone_pg.ranking import CorpusStats, micros

__all__ = [
    "FILTERS",
    "CliOption",
    "Columns",
    "FieldMatch",
    "FilterKey",
    "MemoryFilter",
    "filtered_stats",
    "json_contains",
    "parse_filters",
    "register",
]

Mask = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]


class Columns(Protocol):
    """What a key's ``mask`` reads: an agent's memories as columns aligned by row (the in-memory
    store's ``FilterIndex``). Every method answers for all rows at once."""

    def column(self, field: str) -> npt.NDArray[Any]:
        """A scalar field of every memory; datetimes as whole microseconds since the epoch."""

    def any_member(self, field: str, values: Sequence[str]) -> Mask:
        """Rows whose tuple ``field`` holds at least one of ``values``."""

    def isin(self, field: str, values: Sequence[Any]) -> Mask:
        """Rows whose ``field`` equals one of ``values``."""

    def json_contains(self, field: str, value: Mapping[str, Any]) -> Mask:
        """Rows whose JSON object ``field`` contains ``value`` (:func:`json_contains`)."""


@dataclass(frozen=True, slots=True)
class FieldMatch:
    """One payload condition Qdrant evaluates: the payload ``key`` equals ``value``, is one of
    ``any`` (or, for a list, holds one of them), or is at least ``gte``. Exactly one is set."""

    key: str
    value: Any = None
    any: tuple[Any, ...] | None = None
    gte: float | None = None


@dataclass(frozen=True, slots=True)
class CliOption:
    """A key's option of ``actrone-pg memories list``: ``--flag TEXT`` (repeatable if
    ``repeat``: the key's value is then the list of them), ``convert`` turning the text into
    the value the manager takes (raising ``ValueError`` with what is wrong)."""

    flag: str
    help: str
    repeat: bool = False
    convert: Callable[[str], Any] = str


@dataclass(frozen=True, slots=True)
class FilterKey:
    """One filter key and everything each backend needs to apply it."""

    name: str
    #: What the key selects, for the MCP tool's schema.
    description: str
    #: The type a caller passes (the MCP tool's schema), e.g. ``list[str]``.
    annotation: Any
    #: ``(where, value, max_chars)`` -> the checked value, or a ``ValidationError``.
    parse: Callable[[str, object, int], Any]
    #: ``(memory, value)`` -> whether the memory passes: the definition of the key.
    matches: Callable[[Memory, Any], bool]
    #: ``(columns, value)`` -> ``[matches(m, value) for m in memories]``, vectorised.
    mask: Callable[[Columns, Any], Mask]
    #: The condition on a ``memories`` row ``m``; ``{value}`` is the bound parameter.
    sql: str
    #: Whether an index serves ``sql`` (a filter without any is always read in one pass).
    sql_indexed: bool = False
    #: The payload conditions Qdrant checks exactly as ``matches``; ``None``: not pushed down.
    qdrant: Callable[[Any], list[FieldMatch]] | None = None
    cli: CliOption | None = None


#: Every filter key, in the order conditions are checked and compiled.
FILTERS: dict[str, FilterKey] = {}


def register(key: FilterKey) -> FilterKey:
    """Add ``key`` to :data:`FILTERS` (the built-in keys are registered this way)."""
    if not key.name.isidentifier() or key.name in FILTERS:
        raise ValueError(f"filter key {key.name!r} is not a new identifier")
    FILTERS[key.name] = key
    return key


class MemoryFilter:
    """Which memories a search or a listing sees; every condition given must hold.

    ``MemoryFilter(tags_any=("a",), min_importance=0.5)``: one keyword per key of
    :data:`FILTERS`, ``None`` meaning "no condition"; ``flt.tags_any`` reads one back (``None``
    if absent). Values are taken as given: :func:`parse_filters` checks a caller's.
    """

    __slots__ = ("conditions",)

    conditions: dict[str, Any]

    def __init__(self, **conditions: Any) -> None:
        unknown = sorted(set(conditions) - set(FILTERS))
        if unknown:
            raise TypeError(f"unknown filter key(s) {unknown}")
        self.conditions = {k: conditions[k] for k in FILTERS if conditions.get(k) is not None}

    def __getattr__(self, name: str) -> Any:
        if name in FILTERS:
            return self.conditions.get(name)
        raise AttributeError(name)

    def __iter__(self) -> Iterator[tuple[FilterKey, Any]]:
        """Each condition's key and value, in :data:`FILTERS` order."""
        return ((FILTERS[k], value) for k, value in self.conditions.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryFilter) and other.conditions == self.conditions

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={value!r}" for k, value in self.conditions.items())
        return f"MemoryFilter({inner})"

    def matches(self, m: Memory) -> bool:
        """Whether memory ``m`` passes every condition (the reference every backend matches)."""
        return all(key.matches(m, value) for key, value in self)

    def mask(self, columns: Columns, rows: int) -> Mask:
        """Which of ``rows`` rows of ``columns`` pass: ``matches`` for all of them at once."""
        out = np.ones(rows, dtype=bool)
        for key, value in self:
            out &= key.mask(columns, value)
        return out


def parse_filters(value: object, *, max_chars: int) -> MemoryFilter | None:
    """A caller's ``filters``: a mapping of :data:`FILTERS` keys, each value checked by its key.

    ``None`` or an empty mapping is no filter; an unknown key or a bad value is a
    ``ValidationError``.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(f"filters must be a dict, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in FILTERS)
    if unknown:
        raise ValidationError(f"unknown filter key(s) {unknown}; the keys are {', '.join(FILTERS)}")
    if not value:
        return None
    return MemoryFilter(
        **{
            k: key.parse(f"filters[{k!r}]", value[k], max_chars)
            for k, key in FILTERS.items()
            if k in value
        }
    )


def filtered_stats(
    mask: Mask, lengths: npt.NDArray[np.int64], rows_of: Callable[[str], Rows], terms: Sequence[str]
) -> CorpusStats:
    """The BM25 statistics of the rows in ``mask``: their number, total length (``lengths`` of
    every row) and the document frequency of each of ``terms`` (``rows_of(term)``: the rows
    holding it). The one definition of a filtered set's statistics for the Python stores."""
    doc_freq: dict[str, int] = {}
    for term in dict.fromkeys(terms):
        df = int(np.count_nonzero(mask[rows_of(term)]))
        if df:
            doc_freq[term] = df
    return CorpusStats(int(np.count_nonzero(mask)), int(lengths[mask].sum()), doc_freq)


def json_contains(container: Any, contained: Any) -> bool:
    """PostgreSQL's ``jsonb @>`` on plain JSON values: objects contain sub-objects key by key,
    an array contains an array whose every element some element of it contains (order and
    repetition ignored), scalars only an equal scalar of the same JSON type (``true`` is not
    ``1``); at the top level only, an array also contains a scalar it holds."""
    if isinstance(container, list) and not isinstance(contained, (dict, list)):
        return any(_same_scalar(c, contained) for c in container)
    return _contains(container, contained)


def _contains(container: Any, contained: Any) -> bool:
    if isinstance(contained, dict):
        return isinstance(container, dict) and all(
            k in container and _contains(container[k], v) for k, v in contained.items()
        )
    if isinstance(contained, list):
        return isinstance(container, list) and all(
            any(_contains_element(c, item) for c in container) for item in contained
        )
    return _same_scalar(container, contained)


def _contains_element(container: Any, item: Any) -> bool:
    # Inside arrays a scalar is not contained by an array ([[1]] does not contain [1]).
    if isinstance(item, (dict, list)):
        return isinstance(container, type(item)) and _contains(container, item)
    return _same_scalar(container, item)


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


# -- how the built-in keys check a caller's value --
def _labels(where: str, value: object, max_chars: int) -> tuple[str, ...]:
    """A list or tuple of non-blank labels (a lone string is refused)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"{where} must be a list or tuple of strings")
    if len(value) > v.MAX_TAGS:
        raise ValidationError(f"{where}: at most {v.MAX_TAGS} values, got {len(value)}")
    return tuple(v.check_label(where, item) for item in value)


def _id(where: str, value: object, max_chars: int) -> str:
    return v.check_id(where, value)


def _datetime(where: str, value: object, max_chars: int) -> datetime:
    """A timezone-aware datetime."""
    return v.check_datetime(where, value)


def _importance(where: str, value: object, max_chars: int) -> float:
    """A number in [0, 1]."""
    try:
        return v.check_importance(value)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None


def _json_object(where: str, value: object, max_chars: int) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where} must be a dict (a JSON object)")
    out = v.check_json(where, value, max_chars=max_chars)
    assert isinstance(out, dict)
    return out


def _iso_datetime(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {text!r}") from None


def _json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"not JSON: {text!r}") from None


# -- the built-in keys (spec §9.3) --
register(
    FilterKey(
        "tags_any",
        "Memories with any of these tags.",
        list[str],
        _labels,
        matches=lambda m, tags: bool(set(tags) & set(m.tags)),
        mask=lambda c, tags: c.any_member("tags", tags),
        sql="m.tags && {value}::text[]",
        sql_indexed=True,
        qdrant=lambda tags: [FieldMatch("tags", any=tuple(tags))] if tags else [],
        cli=CliOption("--tag", "has this tag (repeat: any of them)", repeat=True),
    )
)
register(
    FilterKey(
        "tags_all",
        "Memories with all of these tags.",
        list[str],
        _labels,
        matches=lambda m, tags: set(tags) <= set(m.tags),
        mask=lambda c, tags: np.logical_and.reduce(
            [c.any_member("tags", (t,)) for t in dict.fromkeys(tags)], initial=True
        ),
        sql="m.tags @> {value}::text[]",
        sql_indexed=True,
        qdrant=lambda tags: [FieldMatch("tags", value=t) for t in tags],
        cli=CliOption("--all-tags", "has this tag (repeat: all of them)", repeat=True),
    )
)
register(
    FilterKey(
        "content_types",
        "Memories with one of these content types (fact, preference, ...).",
        list[str],
        _labels,
        matches=lambda m, types: m.content_type in types,
        mask=lambda c, types: c.isin("content_type", types),
        sql="m.content_type = ANY ({value}::text[])",
        qdrant=lambda types: [FieldMatch("content_type", any=tuple(types))] if types else [],
        cli=CliOption("--content-type", "of this content type", repeat=True),
    )
)
register(
    FilterKey(
        "session_id",
        "Memories from this session.",
        str,
        _id,
        matches=lambda m, session: m.session_id == session,
        mask=lambda c, session: c.isin("session_id", (session,)),
        sql="m.session_id = {value}",
        qdrant=lambda session: [FieldMatch("session_id", value=session)],
        cli=CliOption("--session", "from this session"),
    )
)
# created_at bounds compare whole microseconds since the epoch in the mask: the order of the
# instants, which is Python's order of aware datetimes at microsecond resolution (the manager
# stores and validates them in UTC). Qdrant has no datetime index in local mode: not pushed down.
register(
    FilterKey(
        "created_after",
        "Memories created after this ISO 8601 time (with a time zone).",
        datetime,
        _datetime,
        matches=lambda m, t: m.created_at > t,
        mask=lambda c, t: c.column("created_at") > micros(t),
        sql="m.created_at > {value}",
        sql_indexed=True,
        cli=CliOption("--after", "created after (ISO 8601, with zone)", convert=_iso_datetime),
    )
)
register(
    FilterKey(
        "created_before",
        "Memories created before this ISO 8601 time (with a time zone).",
        datetime,
        _datetime,
        matches=lambda m, t: m.created_at < t,
        mask=lambda c, t: c.column("created_at") < micros(t),
        sql="m.created_at < {value}",
        sql_indexed=True,
        cli=CliOption("--before", "created before (ISO 8601)", convert=_iso_datetime),
    )
)
register(
    FilterKey(
        "min_importance",
        "Memories at least this important (0 to 1).",
        float,
        _importance,
        matches=lambda m, least: m.importance >= least,
        mask=lambda c, least: c.column("importance") >= least,
        sql="m.importance >= {value}::float8",
        qdrant=lambda least: [FieldMatch("importance", gte=least)],
        cli=CliOption("--min-importance", "importance at least this", convert=float),
    )
)
# Qdrant's nested matching is not jsonb's containment: not pushed down.
register(
    FilterKey(
        "metadata",
        "A JSON object that each memory's metadata must contain.",
        dict[str, Any],
        _json_object,
        matches=lambda m, obj: json_contains(m.metadata, obj),
        mask=lambda c, obj: c.json_contains("metadata", obj),
        sql="m.metadata @> {value}::jsonb",
        sql_indexed=True,
        cli=CliOption("--metadata", "a JSON object the metadata must contain", convert=_json_text),
    )
)
