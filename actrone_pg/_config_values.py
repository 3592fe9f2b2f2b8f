"""How a setting gets its value: a keyword in code, else an ``ACTRONE_*`` variable, else default.

Each value is coerced to its field's type here (``"true"`` to a bool, ``"[1, 1, 0.3]"`` to three
floats, ...), and a value of the wrong type raises :class:`~actrone_pg.errors.ConfigurationError`
naming the field. What values are *valid* is :mod:`actrone_pg.config`'s concern.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actrone_pg.errors import ConfigurationError

__all__ = ["ENV_PREFIX", "NOT_SETTINGS", "NOT_SETTINGS_PREFIXES", "resolve"]

ENV_PREFIX = "ACTRONE_"
#: ``ACTRONE_*`` variables that are not settings: the test suite's servers and model
#: (``ACTRONE_TEST_*``), the benchmark's reference interpreter, the model export script's venv.
NOT_SETTINGS_PREFIXES = ("ACTRONE_TEST_", "ACTRONE_BENCH_", "ACTRONE_EXPORT_")
#: Variables of the library's commands that are not MemoryConfig fields (``actrone-pg mcp``
#: reads its bearer token from ACTRONE_MCP_TOKEN), so not reported as unknown settings.
NOT_SETTINGS = frozenset({"ACTRONE_MCP_TOKEN"})

# The config's logger: a stray variable is reported as a setting's problem.
logger = logging.getLogger("actrone_pg.config")

_warned_env: set[str] = set()
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def resolve(
    cls: type[Any], explicit: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """The value of every field of the dataclass ``cls``, coerced to its type: ``explicit``'s,
    else the ``ACTRONE_<NAME>`` variable's in ``environ``, else the default."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(explicit) - set(fields))
    if unknown:
        raise ConfigurationError(
            unknown[0], f"unknown setting; valid ones are {', '.join(sorted(fields))}"
        )
    _warn_unknown_env(fields, environ)
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for name, f in fields.items():
        if name in explicit:
            values[name] = _coerce(name, hints[name], explicit[name], from_env=False)
            continue
        env_name = ENV_PREFIX + name.upper()
        if env_name in environ:
            values[name] = _coerce(name, hints[name], environ[env_name], from_env=True)
        elif f.default is not dataclasses.MISSING:
            values[name] = f.default
        else:
            assert f.default_factory is not dataclasses.MISSING
            values[name] = f.default_factory()
    return values


def _warn_unknown_env(fields: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """Log once per variable an ``ACTRONE_*`` variable that names no setting (a typo, usually).

    A log record rather than a warning: a stray variable is the environment's business, and it
    must not turn into an exception where warnings are errors.
    """
    known = {ENV_PREFIX + name.upper() for name in fields}
    for var in environ:
        if (
            not var.startswith(ENV_PREFIX)
            or var in known
            or var in _warned_env
            or var.startswith(NOT_SETTINGS_PREFIXES)
            or var in NOT_SETTINGS
        ):
            continue
        _warned_env.add(var)
        # Compared without the prefix, which every name shares and would make all look alike.
        names = sorted(name.upper() for name in fields)
        close = difflib.get_close_matches(var.removeprefix(ENV_PREFIX), names, n=1)
        hint = (
            f"did you mean {ENV_PREFIX}{close[0]}?"
            if close
            else "the settings are listed in docs/configuration.md"
        )
        logger.warning("%s is not a setting of actrone_pg and is ignored; %s", var, hint)


def _coerce(name: str, hint: Any, value: Any, *, from_env: bool) -> Any:
    optional = False
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = True
        hint = args[0]
        origin = typing.get_origin(hint)
    if value is None:
        if optional:
            return None
        raise ConfigurationError(name, "must not be None")
    if from_env and isinstance(value, str):
        text = value.strip()
        if optional and text.lower() in ("", "none", "null"):
            return None
        value = _parse_env(name, hint, text)
    try:
        if hint is bool:
            if not isinstance(value, bool):
                raise ConfigurationError(name, f"expected true or false, got {value!r}")
            return value
        if hint is int:
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    return int(value)
                raise ConfigurationError(name, f"expected a whole number, got {value!r}")
            return value
        if hint is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigurationError(name, f"expected a number, got {value!r}")
            out = float(value)
            if not math.isfinite(out):
                raise ConfigurationError(name, f"expected a finite number, got {value!r}")
            return out
        if hint is str:
            if isinstance(value, Path):
                return str(value)
            if not isinstance(value, str):
                raise ConfigurationError(name, f"expected text, got {value!r}")
            return value
        if hint == tuple[str, ...]:
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                raise ConfigurationError(name, f"expected a list of strings, got {value!r}")
            labels = tuple(value)
            if not all(isinstance(v, str) and v.strip() for v in labels):
                raise ConfigurationError(name, f"expected non-empty strings, got {value!r}")
            return labels
        if origin is tuple:
            # A fixed-length tuple of floats, or tuple[float, ...] (its length is the field's
            # own check: rrf_weights has one weight per ranking).
            kinds = typing.get_args(hint)
            count = None if kinds[-1] is Ellipsis else len(kinds)
            items = list(value) if not isinstance(value, (str, bytes)) else None
            if items is None or (count is not None and len(items) != count):
                wanted = "numbers" if count is None else f"{count} numbers"
                raise ConfigurationError(name, f"expected {wanted}, got {value!r}")
            out_t = tuple(_coerce(name, float, v, from_env=False) for v in items)
            return out_t
    except TypeError:
        raise ConfigurationError(name, f"invalid value {value!r}") from None
    raise ConfigurationError(name, f"unsupported type {hint!r}")  # pragma: no cover


def _parse_env(name: str, hint: Any, text: str) -> Any:
    if hint is bool:
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigurationError(name, f"expected true or false, got {text!r}")
    if hint is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigurationError(name, f"expected a whole number, got {text!r}") from None
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigurationError(name, f"expected a number, got {text!r}") from None
    if hint == tuple[str, ...]:
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError:
                raise ConfigurationError(
                    name, f"expected a JSON list of strings or a,b,c; got {text!r}"
                ) from None
        return [p.strip() for p in text.split(",") if p.strip()]
    if typing.get_origin(hint) is tuple:
        try:
            parsed = (
                json.loads(text) if text.startswith("[") else [float(p) for p in text.split(",")]
            )
        except ValueError:
            raise ConfigurationError(
                name, f"expected a list of numbers such as '[1, 1, 0.3]', got {text!r}"
            ) from None
        if not isinstance(parsed, list):
            raise ConfigurationError(name, f"expected a list of numbers, got {text!r}")
        return parsed
    return text
