"""Lexing and parsing: ``<<`` ``>>`` actions, trim markers and comments, pipelines, control structures; every
function and field checked against what exists when the template is parsed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from adapter.promadapter.gotemplate.tree import Kind, Node, Operand, Pipe, TemplateError

_BUILTINS = frozenset("and or not len index print printf println eq ne lt le gt ge".split())
_GO_BUILTINS_NOT_HERE = frozenset({"call", "html", "js", "slice", "urlquery"})
_GO_KIND = {"str": "string", "list": "[]string", "int": "int", "bool": "bool"}
_KEYWORDS = frozenset({"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"})

# --- lexing ---------------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<ws>\s+)
    |(?P<str>"(?:[^"\\\n]|\\.)*")
    |(?P<raw>`[^`]*`)
    |(?P<decl>:=)
    |(?P<punct>[()|,=])
    |(?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
    |(?P<dot>\.)
    |(?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    |(?P<num>-?[0-9]+)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)
_GO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unquote(text: str) -> str:
    out, i = [], 1
    while i < len(text) - 1:
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in _GO_ESCAPES:
            out.append(_GO_ESCAPES[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = text[i + 2 : i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise TemplateError(f"invalid syntax in string {text}")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise TemplateError(f"invalid syntax in string {text}")
    return "".join(out)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str


def _lex_action(body: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if m is None:
            raise TemplateError(f"unexpected {body[pos]!r} in action")
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(_Tok(kind, m.group()))
        pos = m.end()
    return toks


def _find_close(src: str, start: int) -> int:
    """Index of the ``>>`` closing the action that starts at ``start``, skipping string literals."""
    i = start
    while i < len(src):
        ch = src[i]
        if ch == '"':
            i += 1
            while i < len(src) and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
        elif ch == "`":
            i = src.find("`", i + 1)
            if i < 0:
                break
        elif src.startswith(">>", i):
            return i
        i += 1
    raise TemplateError("unclosed action")


def _pieces(src: str) -> list[tuple[str, str]]:
    """("text", s) and ("action", body) pieces, trim markers applied."""
    out: list[tuple[str, str]] = []
    pos = 0
    trim_next = False
    while True:
        start = src.find("<<", pos)
        text = src[pos:] if start < 0 else src[pos:start]
        if trim_next:
            text = text.lstrip(" \t\r\n")
        if start < 0:
            if text:
                out.append(("text", text))
            return out
        inner = start + 2
        if src[inner : inner + 1] == "-" and src[inner + 1 : inner + 2] in (" ", "\t", "\r", "\n"):
            text = text.rstrip(" \t\r\n")
            inner += 1
        if text:
            out.append(("text", text))
        close = _find_close(src, inner)
        body = src[inner:close]
        trim_next = False
        if len(body) >= 2 and body.endswith("-") and body[-2] in " \t\r\n":
            body = body[:-1]
            trim_next = True
        stripped = body.strip()
        if not (stripped.startswith("/*") and stripped.endswith("*/")):
            out.append(("action", body))
        pos = close + 2


class _Parser:
    def __init__(self, source: str, fields: Mapping[str, Kind]) -> None:
        self._pieces = _pieces(source)
        self._pos = 0
        self._fields = fields

    def parse(self) -> list[Node]:
        nodes, stop = self._list("struct", {"$": "struct"})
        if stop is not None:
            raise TemplateError(f"unexpected <<{stop}>>")
        return nodes

    def _list(self, dot: Kind, scope: dict[str, Kind]) -> tuple[list[Node], str | None]:
        """Nodes up to an ``end``/``else`` (returned as the stop word, with the rest of an ``else`` action)."""
        nodes: list[Node] = []
        scope = dict(scope)
        while self._pos < len(self._pieces):
            kind, body = self._pieces[self._pos]
            self._pos += 1
            if kind == "text":
                nodes.append(Node("text", text=body))
                continue
            toks = _lex_action(body)
            if not toks:
                raise TemplateError("missing value for command")
            head = toks[0]
            if head.kind == "ident" and head.text in ("end", "else"):
                return nodes, " ".join(t.text for t in toks)
            if head.kind == "ident" and head.text in ("if", "range", "with"):
                nodes.append(self._control(head.text, toks[1:], dot, scope))
            elif head.kind == "ident" and head.text in _KEYWORDS:
                raise TemplateError(f"{head.text!r} is not supported in prometheus-adapter rules here")
            else:
                pipe = self._pipe(toks, dot, scope, declare=True)
                nodes.append(Node("action", pipe=pipe))
        return nodes, None

    def _control(self, word: str, toks: list[_Tok], dot: Kind, scope: dict[str, Kind]) -> Node:
        inner = dict(scope)
        pipe = self._pipe(toks, dot, inner, declare=True, ranging=word == "range")
        kind = self._kind(pipe, dot, inner)
        body_dot: Kind = dot if word == "if" else ("str" if word == "range" and kind in ("list", "map") else kind)
        if word == "range":
            if kind in ("str", "bool", "struct"):
                raise TemplateError(f"range can't iterate over {kind}")
            body_dot = "any" if kind in ("any",) else ("int" if kind == "int" else "str")
            if pipe.decl:
                names = pipe.decl
                if len(names) == 2:
                    inner[names[0]] = "int" if kind in ("list", "int") else "str"
                inner[names[-1]] = body_dot
        elif pipe.decl:
            inner[pipe.decl[-1]] = kind
        body, stop = self._list(body_dot, inner)
        orelse: list[Node] = []
        if stop is None:
            raise TemplateError(f"unexpected EOF: {word} has no end")
        if stop.startswith("else"):
            rest = stop[len("else") :].strip()
            if rest.startswith(("if ", "with ")):
                # ``else if`` / ``else with``: an if/with nested in the else branch; it consumes the shared end.
                sub_word, _, sub_rest = rest.partition(" ")
                nested = self._control(sub_word, _lex_action(sub_rest), dot, scope)
                return Node(word, pipe=pipe, body=tuple(body), orelse=(nested,))
            if rest:
                raise TemplateError(f"unexpected {rest!r} after else")
            orelse, stop = self._list(dot, scope)
            if stop != "end":
                raise TemplateError(f"expected end; found {stop}")
        elif stop != "end":
            raise TemplateError(f"unexpected {stop!r}")
        return Node(word, pipe=pipe, body=tuple(body), orelse=tuple(orelse))

    def _pipe(
        self, toks: list[_Tok], dot: Kind, scope: dict[str, Kind], *, declare: bool, ranging: bool = False
    ) -> Pipe:
        decl: tuple[str, ...] = ()
        assign = False
        if declare and toks and toks[0].kind == "var":
            # "$x :=", "$x =", and in range "$i, $v :=".
            if len(toks) > 1 and toks[1].kind in ("decl",) or (len(toks) > 1 and toks[1].text == "="):
                decl, assign = (toks[0].text,), toks[1].text == "="
                toks = toks[2:]
            elif ranging and len(toks) > 3 and toks[1].text == "," and toks[2].kind == "var" and toks[3].kind == "decl":
                decl = (toks[0].text, toks[2].text)
                toks = toks[4:]
            if assign and decl[0] not in scope:
                raise TemplateError(f"undefined variable: {decl[0]}")
        cmds: list[list[Operand]] = [[]]
        i = 0
        while i < len(toks):
            tok = toks[i]
            if tok.text == "|":
                if not cmds[-1]:
                    raise TemplateError("missing command before |")
                cmds.append([])
                i += 1
                continue
            if tok.text == "(":
                depth, j = 1, i + 1
                while j < len(toks) and depth:
                    depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
                    j += 1
                if depth:
                    raise TemplateError("unclosed left paren")
                sub = self._pipe(toks[i + 1 : j - 1], dot, scope, declare=False)
                cmds[-1].append(Operand("pipe", pipe=sub))
                i = j
                continue
            cmds[-1].append(self._operand(tok, dot, scope))
            i += 1
        if not cmds[-1]:
            raise TemplateError("missing value for command")
        for cmd in cmds:
            head = cmd[0]
            if head.kind != "ident" and len(cmd) > 1:
                shown = "." + ".".join(head.chain) if head.kind == "field" else head.name or repr(head.value)
                raise TemplateError(f"can't give argument to non-function {shown}")
        pipe = Pipe(decl, assign, tuple(tuple(c) for c in cmds))
        if decl and not ranging:
            scope[decl[0]] = self._kind(pipe, dot, scope)
        elif decl:
            for name in decl:
                scope.setdefault(name, "any")
        return pipe

    def _operand(self, tok: _Tok, dot: Kind, scope: dict[str, Kind]) -> Operand:
        if tok.kind == "field":
            chain = tuple(tok.text[1:].split("."))
            self._check_chain(dot, chain)
            return Operand("field", chain=chain)
        if tok.kind == "dot":
            return Operand("dot")
        if tok.kind == "var":
            name, _, rest = tok.text.partition(".")
            if name not in scope:
                raise TemplateError(f"undefined variable {name!r}")
            chain = tuple(rest.split(".")) if rest else ()
            self._check_chain(scope[name], chain)
            return Operand("var", name=name, chain=chain)
        if tok.kind == "str":
            return Operand("str", value=_unquote(tok.text))
        if tok.kind == "raw":
            return Operand("str", value=tok.text[1:-1])
        if tok.kind == "num":
            return Operand("int", value=int(tok.text))
        if tok.kind == "ident":
            if tok.text in ("true", "false"):
                return Operand("bool", value=tok.text == "true")
            if tok.text in _GO_BUILTINS_NOT_HERE:
                raise TemplateError(f"function {tok.text!r} is a Go template builtin this adapter does not implement")
            if tok.text not in _BUILTINS:
                raise TemplateError(f'function "{tok.text}" not defined')
            return Operand("ident", name=tok.text)
        raise TemplateError(f"unexpected {tok.text!r} in operand")

    def _check_chain(self, dot: Kind, chain: tuple[str, ...]) -> None:
        kind: Kind = dot
        for name in chain:
            if kind == "struct":
                if name not in self._fields:
                    known = ", ".join(f".{f}" for f in self._fields)
                    raise TemplateError(f"can't evaluate field {name} (the fields are {known})")
                kind = self._fields[name]
            elif kind == "map":
                kind = "str"
            elif kind == "any":
                return
            else:
                raise TemplateError(f"can't evaluate field {name} in type {_GO_KIND.get(kind, kind)}")

    def _kind(self, pipe: Pipe, dot: Kind, scope: Mapping[str, Kind]) -> Kind:
        """The static kind of a pipeline's value, where it is plain enough to know."""
        last = pipe.cmds[-1]
        head = last[0]
        if len(last) != 1:
            return "any"
        if head.kind == "field":
            kind: Kind = dot
            for name in head.chain:
                kind = self._fields.get(name, "any") if kind == "struct" else "str" if kind == "map" else "any"
            return kind
        if head.kind == "dot":
            return dot
        if head.kind == "var":
            kind = scope.get(head.name, "any")
            for name in head.chain:
                kind = self._fields.get(name, "any") if kind == "struct" else "str" if kind == "map" else "any"
            return kind
        if head.kind in ("str", "int", "bool"):
            return {"str": "str", "int": "int", "bool": "bool"}[head.kind]  # type: ignore[return-value]
        return "any"


def parse_nodes(source: str, fields: Mapping[str, Kind]) -> tuple[Node, ...]:
    """The parse tree of ``source`` for data with ``fields``; ``TemplateError`` for anything not read."""
    return tuple(_Parser(source, fields).parse())
