"""Reading PromQL the way Prometheus' lexer does, to check what the adapter's query builder produced."""

from __future__ import annotations

_GO_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}


def split_literals(query: str) -> tuple[str, list[str]]:
    """(skeleton with every double-quoted literal replaced by "S", decoded literal contents), lexing
    string literals the way Prometheus' lexer does (Go escape syntax)."""
    skeleton, literals, i = [], [], 0
    while i < len(query):
        ch = query[i]
        if ch != '"':
            skeleton.append(ch)
            i += 1
            continue
        i += 1
        out = []
        while True:
            c = query[i]
            if c == '"':
                i += 1
                break
            if c == "\\":
                e = query[i + 1]
                if e == "x":
                    out.append(chr(int(query[i + 2 : i + 4], 16)))
                    i += 4
                    continue
                if e == "u":
                    out.append(chr(int(query[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                out.append(_GO_ESCAPES[e])
                i += 2
                continue
            assert c != "\n", "raw newline inside a literal"
            out.append(c)
            i += 1
        literals.append("".join(out))
        skeleton.append('"S"')
    return "".join(skeleton), literals
