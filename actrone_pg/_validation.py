"""Argument checks shared by the manager. Each raises ValidationError before anything is written."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from actrone_pg.errors import ValidationError

MAX_ID_CHARS = 256
MAX_LABEL_CHARS = 128
MAX_TAGS = 64


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
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValidationError(f"{name} must not contain NUL or other control characters")
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
    """A positive whole number of tokens."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"token_budget must be a whole number, got {value!r}")
    if value <= 0:
        raise ValidationError(f"token_budget must be greater than 0, got {value}")
    return value


def check_limit(name: str, value: object) -> int:
    """A whole number ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a whole number of at least 1, got {value!r}")
    return value


def check_importance(value: object) -> float:
    """A number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"importance must be a number, got {value!r}")
    out = float(value)
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


def check_datetime(name: str, value: object) -> datetime:
    """A timezone-aware datetime."""
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            f"{name} must be timezone-aware (for example datetime.now(timezone.utc))"
        )
    return value


def check_json(name: str, value: object, *, max_chars: int) -> Any:
    """A JSON-serialisable value without NUL characters, at most ``max_chars`` once encoded."""
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{name} must be JSON-serialisable: {exc}") from None
    if "\\u0000" in encoded:
        raise ValidationError(f"{name} contains a NUL character, which PostgreSQL cannot store")
    if len(encoded) > max_chars:
        raise ValidationError(
            f"{name} is {len(encoded):,} characters as JSON; the limit is {max_chars:,}"
        )
    return json.loads(encoded)


def check_metadata(value: object, *, max_chars: int) -> dict[str, Any]:
    """A JSON object (dict with string keys)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("metadata must be a dict")
    out = check_json("metadata", dict(value), max_chars=max_chars)
    assert isinstance(out, dict)
    return out
