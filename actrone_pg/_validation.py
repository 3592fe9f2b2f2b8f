"""Argument checks shared by the manager. Each raises ValidationError before anything is written.

The numeric ranges are the ones every backend's column and command types hold, so that the
memory, PostgreSQL and Redis + Qdrant stores accept and refuse exactly the same calls.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from actrone_pg.errors import ValidationError

if TYPE_CHECKING:
    from actrone_pg.filters import MemoryFilter

MAX_ID_CHARS = 256
MAX_LABEL_CHARS = 128
MAX_TAGS = 64
#: Limits and token budgets: PostgreSQL's ``integer`` (the type of LIMIT arguments and token counts
#: in the search function).
MAX_INT = 2**31 - 1
#: Lock TTLs: one year, far inside PostgreSQL's interval and Redis's millisecond expiry.
MAX_TTL_SECONDS = 365 * 24 * 3600
#: Whole numbers inside metadata and tool results: a signed 64-bit integer (Qdrant payloads).
MIN_JSON_INT, MAX_JSON_INT = -(2**63), 2**63 - 1
#: Lists and objects nested inside metadata and tool results (``{"a": [1]}`` is depth 2).
MAX_JSON_DEPTH = 32
#: NUL and the other control characters an id may not hold (C0 and DEL).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_id(name: str, value: object) -> str:
    """A non-blank id of at most 256 characters, with no NUL or other control characters."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError(f"{name} must not be empty or blank")
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(
            f"{name} is {len(value)} characters long; the limit is {MAX_ID_CHARS}"
        )
    if _CONTROL.search(value):
        raise ValidationError(f"{name} must not contain NUL or other control characters")
    _check_surrogates(name, value)
    return value


def check_text(name: str, value: object, max_chars: int, *, allow_empty: bool = False) -> str:
    """Text without NUL bytes (PostgreSQL rejects them) and at most ``max_chars`` long."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ValidationError(f"{name} must not be empty or blank")
    if len(value) > max_chars:
        raise ValidationError(
            f"{name} is {len(value):,} characters long; the limit is {max_chars:,} "
            "(raise MemoryConfig.max_text_chars, or split the text)"
        )
    if "\x00" in value:
        raise ValidationError(f"{name} contains a NUL byte (\\x00), which PostgreSQL cannot store")
    _check_surrogates(name, value)
    return value


def _check_surrogates(name: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{name} is not valid Unicode (it has lone surrogates)") from None


def check_label(name: str, value: object) -> str:
    """A short non-blank label such as ``content_type``, ``source`` or ``sensitivity``."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{name} must be a non-empty string")
    if len(value) > MAX_LABEL_CHARS or "\x00" in value:
        raise ValidationError(f"{name} must be at most {MAX_LABEL_CHARS} characters, without NUL")
    _check_surrogates(name, value)
    return value


def check_budget(value: object) -> int:
    """A whole number of tokens in [1, 2,147,483,647]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"token_budget must be a whole number, got {value!r}")
    if value <= 0:
        raise ValidationError(f"token_budget must be greater than 0, got {value}")
    if value > MAX_INT:
        raise ValidationError(f"token_budget must lie in [1, {MAX_INT:,}], got {value:,}")
    return value


def check_limit(name: str, value: object) -> int:
    """A whole number in [1, 2,147,483,647]."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INT:
        raise ValidationError(f"{name} must be a whole number in [1, {MAX_INT:,}], got {value!r}")
    return value


def check_ttl(name: str, value: object) -> float:
    """A number of seconds in (0, one year]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be a number of seconds, got {value!r}")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not (math.isfinite(out) and 0.0 < out <= MAX_TTL_SECONDS):
        raise ValidationError(
            f"{name} must lie in (0, {MAX_TTL_SECONDS:,}] seconds (one year), got {value!r}"
        )
    return out


def check_importance(value: object) -> float:
    """A number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"importance must be a number, got {value!r}")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out) or not 0.0 <= out <= 1.0:
        raise ValidationError(f"importance must lie in [0, 1], got {value!r}")
    return out


def check_tags(value: object) -> tuple[str, ...]:
    """A sequence of short non-blank strings (a lone string is refused: it is not a list)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValidationError("tags must be a list or tuple of strings")
    tags = tuple(value)
    if len(tags) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags, got {len(tags)}")
    for tag in tags:
        check_label("each tag", tag)
    return tags


#: At most this many source turns per memory (a consolidation of a long session lists them all).
MAX_SOURCE_TURNS = 10_000


def check_turn_ids(value: object) -> tuple[str, ...]:
    """``source_turn_ids``: a list of turn ids (a lone string is refused: it is not a list)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValidationError("source_turn_ids must be a list or tuple of turn ids")
    ids = tuple(value)
    if len(ids) > MAX_SOURCE_TURNS:
        raise ValidationError(f"at most {MAX_SOURCE_TURNS:,} source_turn_ids, got {len(ids):,}")
    for turn_id in ids:
        check_id("each source turn id", turn_id)
    return ids


def check_datetime(name: str, value: object) -> datetime:
    """A timezone-aware datetime."""
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a datetime, got {type(value).__name__}")
    try:
        aware = value.tzinfo is not None and value.utcoffset() is not None
        utc = value.astimezone(UTC) if aware else None
    except OverflowError:
        raise ValidationError(
            f"{name} {value.isoformat()} lies outside the years 1–9999 once converted to UTC"
        ) from None
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{name} has a broken time zone: {exc}") from exc
    if utc is None:
        raise ValidationError(
            f"{name} must be timezone-aware (for example datetime.now(timezone.utc))"
        )
    return utc


def check_json(name: str, value: object, *, max_chars: int) -> Any:
    """A JSON value, returned as plain dict, list, str, int, float, bool and None.

    Objects need string keys; strings hold no NUL and no lone surrogates; whole numbers fit a
    signed 64-bit integer; floats are finite; nesting is at most
    ``MAX_JSON_DEPTH`` deep; and the encoded JSON is at most ``max_chars`` long.
    """
    out = _plain_json(name, value, 0)
    encoded = json.dumps(out, ensure_ascii=False)
    if len(encoded) > max_chars:
        raise ValidationError(
            f"{name} is {len(encoded):,} characters as JSON; the limit is {max_chars:,}"
        )
    return out


def _plain_json(where: str, value: object, depth: int) -> Any:
    # Checked by walking rather than by json.dumps: dumps silently turns {1: x} into {"1": x},
    # escapes lone surrogates that PostgreSQL then refuses, and recurses until RecursionError.
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(
                f"{where} contains a NUL character, which PostgreSQL cannot store"
            )
        _check_surrogates(where, value)
        return str(value)
    if isinstance(value, int):
        if not MIN_JSON_INT <= value <= MAX_JSON_INT:
            raise ValidationError(
                f"{where}: whole numbers must fit a signed 64-bit integer"
                f" [{MIN_JSON_INT}, {MAX_JSON_INT}]"
            )
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{where} contains NaN or an infinite number, which JSON has not")
        return float(value)
    if isinstance(value, (Mapping, list, tuple)):
        if depth >= MAX_JSON_DEPTH:
            raise ValidationError(
                f"{where} nests lists and objects more than {MAX_JSON_DEPTH} levels deep"
            )
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValidationError(
                        f"{where}: object keys must be strings, got {type(key).__name__}"
                    )
                _plain_json(f"{where} key", key, depth)
                out[str(key)] = _plain_json(f"{where}[{key!r}]", item, depth + 1)
            return out
        return [_plain_json(f"{where}[{i}]", item, depth + 1) for i, item in enumerate(value)]
    raise ValidationError(
        f"{where} must be JSON (dict, list, str, int, float, bool or None),"
        f" got {type(value).__name__}"
    )


def check_metadata(value: object, *, max_chars: int) -> dict[str, Any]:
    """A JSON object (dict with string keys)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("metadata must be a dict")
    out = check_json("metadata", value, max_chars=max_chars)
    assert isinstance(out, dict)
    return out


def check_filters(value: object, *, max_chars: int) -> MemoryFilter | None:
    """``filters`` (spec §9.3), each value checked by its key's definition: see
    :func:`actrone_pg.filters.parse_filters`."""
    if value is None:  # most calls: no filter, and no import to look up
        return None
    # actrone_pg.filters checks values with this module's functions: imported here, so that
    # the dependency goes one way.
    from actrone_pg.filters import parse_filters

    return parse_filters(value, max_chars=max_chars)
