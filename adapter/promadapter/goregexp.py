"""Go's ``regexp`` as prometheus-adapter uses it, on top of Python's ``re``: compile and ``Expand``.

prometheus-adapter compiles ``seriesFilters`` and ``name.matches`` with Go's ``regexp.Compile`` (RE2 syntax),
matches them unanchored (``MatchString``) and builds API names with ``Regexp.ExpandString`` (``name.as``).
Python's ``re`` reads the RE2 syntax real configurations use; what differs is handled here:

* ``\\d``, ``\\w``, ``\\s``, ``\\b`` are ASCII-only in RE2: compiled with ``re.ASCII``.
* POSIX classes inside brackets (``[[:alpha:]]``) and ``\\z`` are RE2 only: translated.
* Look-around and back-references are Python only: refused, as Go refuses them, so a file this adapter
  accepts is one prometheus-adapter accepts.
"""

from __future__ import annotations

import re

_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_POSIX_RE = re.compile(r"\[:(\^?)([a-z]+):\]")
# Python-only constructs, outside a character class: look-ahead/behind, (?<name>...) aside, and \1..\9.
_PY_ONLY = re.compile(r"\(\?(?:=|!|<=|<!)|\\[1-9]")


def compile_go(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with RE2's meaning; ``ValueError`` (Go-like wording) when Go would refuse it."""
    if _PY_ONLY.search(pattern.replace("\\\\", "")):
        raise ValueError(f"error parsing regexp: invalid or unsupported Perl syntax in {pattern!r}")

    def posix(m: re.Match[str]) -> str:
        negate, name = m.groups()
        if name not in _POSIX or negate:
            raise ValueError(f"error parsing regexp: invalid character class range: {m.group()!r}")
        return _POSIX[name]

    translated = _POSIX_RE.sub(posix, pattern).replace("\\z", "\\Z")
    translated = translated.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!")
    try:
        return re.compile(translated, re.ASCII)
    except re.error as exc:
        raise ValueError(f"error parsing regexp: {exc}") from None


def _extract(text: str) -> tuple[str, int, str] | None:
    """Go's ``regexp.extract``: the name after a ``$`` (``name`` or ``{name}``), its number (-1 when it is
    not a number), and the rest; None when malformed (the ``$`` is then literal)."""
    brace = text.startswith("{")
    body = text[1:] if brace else text
    i = 0
    while i < len(body) and (body[i].isalnum() or body[i] == "_"):
        i += 1
    if i == 0:
        return None
    name = body[:i]
    if brace:
        if i >= len(body) or body[i] != "}":
            return None
        i += 1
    num = int(name) if name.isascii() and name.isdigit() and not (name[0] == "0" and len(name) > 1) else -1
    if num >= 10**8:
        num = -1
    return name, num, body[i:]


def expand(template: str, match: re.Match[str]) -> str:
    """``Regexp.ExpandString``: ``$1``/``${1}`` a group by number, ``$name``/``${name}`` by name, ``$$`` a
    dollar. As in Go, ``$1_x`` names a group called ``1_x`` (nothing: write ``${1}_x``), and an unknown group
    expands to nothing."""
    out: list[str] = []
    rest = template
    while True:
        before, dollar, after = rest.partition("$")
        out.append(before)
        if not dollar:
            return "".join(out)
        if after.startswith("$"):
            out.append("$")
            rest = after[1:]
            continue
        parsed = _extract(after)
        if parsed is None:
            out.append("$")
            rest = after
            continue
        name, num, rest = parsed
        group: str | None = None
        if num >= 0:
            group = match.group(num) if num <= match.re.groups else None
        elif name in match.re.groupindex:
            group = match.group(name)
        out.append(group or "")
