"""Passwords and API keys masked in connection strings, URLs and log lines."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["redact"]

_SECRET_PARAMS = {"password", "api_key", "apikey", "token"}
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
# key=value connection strings: password=secret or password='it''s secret' (libpq's quoting);
# not preceded by ? or &, where it is a URL's query parameter, masked with its URL.
_KV_PASSWORD = re.compile(r"(?<![?&\w])(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def redact(text: str) -> str:
    """``text`` with the passwords of the connection strings and URLs in it replaced by ``***``.

    Handles URLs (``postgresql://user:secret@host/db``, ``redis://:secret@host``, a
    ``?password=`` or ``?api_key=`` query parameter) and libpq's key=value form
    (``host=h password=secret``), anywhere in ``text``, so it also serves for log lines.
    """
    return _KV_PASSWORD.sub(r"\1***", _URL.sub(lambda m: _redact_url(m.group(0)), text))


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an invalid IPv6 host: mask everything between :// and @
        return re.sub(r"(://)[^@]*@", r"\1***@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in _SECRET_PARAMS for k, _ in pairs):
            masked = [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs]
            query = urlencode(masked, safe="*/:")
    return urlunsplit(parts._replace(netloc=netloc, query=query))
