"""Secrets never reach a log line, whichever logger writes it (the adapter's, httpx's, httpcore's, uvicorn's).

``install()`` wraps the logging record factory, so every record of every logger is redacted once, when it is
created, before any handler or formatter sees it: uvicorn's loggers have handlers of their own (not the root's),
so a filter on the root handler alone would miss them. Redacted: the password of any ``scheme://user:password@``
URL, the credentials after ``Bearer`` / ``Basic``, and every secret value the adapter registered
(``register_secret``: the bearer-token and basic-auth files' contents, ``--backend-header`` values, the
password of ``--prometheus-url``). Exception tracebacks attached to a record are rendered and redacted too.

httpx writes one INFO line per request (its URL, userinfo included); it is demoted to DEBUG-only (the ``httpx``
logger logs at WARNING unless the adapter runs at ``--log-level debug``), and redacted like everything else.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

MASK = "***"
# Shorter values are not registered: masking "a" or "ok" everywhere would garble the log and protect nothing.
_MIN_SECRET = 4
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/@\s:'\"]*):([^/@\s'\"]+)@")
# A credential after the scheme: 8+ token characters, not all lowercase letters ("Basic authentication" stays).
_SCHEMES = re.compile(r"\b(Bearer|Basic|bearer|basic)(\s+)(?=[A-Za-z0-9._~+/=-]*[^a-z\s])[A-Za-z0-9._~+/=-]{8,}")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_installed = False


def register_secret(value: str) -> None:
    """Mask ``value`` in every log line from now on (and its URL-encoded form, as it appears in URLs)."""
    global _secrets
    from urllib.parse import quote

    value = value.strip()
    if len(value) < _MIN_SECRET:
        return
    with _lock:
        found = set(_secrets)
        for form in (value, quote(value, safe="")):
            found.add(form)
        # Longest first, so a secret that contains another is masked whole.
        _secrets = tuple(sorted(found, key=len, reverse=True))


def redact(text: str) -> str:
    """``text`` with URL passwords, Bearer/Basic credentials and registered secrets masked."""
    text = _USERINFO.sub(rf"\1:{MASK}@", text)
    text = _SCHEMES.sub(rf"\1\2{MASK}", text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed format string: keep the raw parts, redacted
        message = f"{record.msg} {record.args}"
    record.msg, record.args = redact(message), None
    if record.exc_info:
        # Formatters use a record's exc_text when it is set; exc_info stays for handlers that inspect it.
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def install(level: int | str = logging.INFO) -> None:
    """Redact every log record from now on (idempotent), and keep httpx's per-request line at DEBUG only."""
    global _installed
    numeric = logging.getLevelName(level) if isinstance(level, str) else level
    logging.getLogger("httpx").setLevel(logging.DEBUG if numeric == logging.DEBUG else logging.WARNING)
    with _lock:
        if _installed:
            return
        _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    logging.setLogRecordFactory(factory)
