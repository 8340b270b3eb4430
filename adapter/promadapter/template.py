"""The Go ``text/template`` subset prometheus-adapter's rules are written in, with ``<<`` ``>>`` delimiters.

prometheus-adapter parses ``metricsQuery`` and ``resources.template`` with
``template.New(...).Delims("<<", ">>").Parse(...)`` and registers no function of its own
(``pkg/naming/metrics_query.go``, ``pkg/naming/resource_converter.go``): a rule may use the fields of its data
and Go's builtin functions, nothing else (``join`` and the other sprig functions of Helm are not there; a rule
naming one fails upstream with ``function "join" not defined``, and here alike).

What is read: text; actions ``<<pipeline>>`` with ``|`` pipes, fields (``.Series``, ``.LabelValuesByName.pod``),
``.``, ``$``, variables (``$x := ...``, ``$x = ...``), string/raw-string/integer/``true``/``false`` literals,
parenthesised pipelines; ``if``/``else if``/``else``, ``range`` (``$i, $v :=``, over a list or a map in key
order, with ``else``), ``with``, ``end``; trim markers ``<<-`` and ``->>``; comments ``<</* */>>``; the builtins
``and or not len index print printf println eq ne lt le gt ge``. Values print as Go prints them: a list as
``[a b]``, a map as ``map[k:v]`` (keys sorted), a missing map key reached by a field as ``<no value>``.

Checked when the template is parsed (so at start-up, never on a request): an unknown function, a field the
data does not have, a field on a value that has none (a string element inside ``range``), a Go builtin this
subset does not implement (``call html js slice urlquery``), ``define``/``template``/``block``/``break``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Union

# The static type of a value: what fields, ranging and printing may do with it.
Kind = Literal["str", "list", "map", "struct", "int", "bool", "any"]
Value = Union[str, int, bool, list["Value"], dict[str, "Value"], "Struct", None]


class TemplateError(ValueError):
    """The template cannot be parsed, names something that does not exist, or failed while rendering."""


class Struct(dict[str, Value]):
    """A template's data: fields, not map keys (a missing field is an error, a missing map key is not)."""


class _NoValue:
    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE = _NoValue()
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


# --- the parse tree -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Operand:
    kind: str  # field | dot | var | str | int | bool | ident | pipe
    name: str = ""
    chain: tuple[str, ...] = ()
    value: Value = None
    pipe: _Pipe | None = None


@dataclass(frozen=True)
class _Pipe:
    decl: tuple[str, ...]
    assign: bool
    cmds: tuple[tuple[_Operand, ...], ...]


@dataclass
class _Node:
    kind: str  # text | action | if | range | with
    text: str = ""
    pipe: _Pipe | None = None
    body: list[_Node] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)


class _Parser:
    def __init__(self, source: str, fields: Mapping[str, Kind]) -> None:
        self._pieces = _pieces(source)
        self._pos = 0
        self._fields = fields

    def parse(self) -> list[_Node]:
        nodes, stop = self._list("struct", {"$": "struct"})
        if stop is not None:
            raise TemplateError(f"unexpected <<{stop}>>")
        return nodes

    def _list(self, dot: Kind, scope: dict[str, Kind]) -> tuple[list[_Node], str | None]:
        """Nodes up to an ``end``/``else`` (returned as the stop word, with the rest of an ``else`` action)."""
        nodes: list[_Node] = []
        scope = dict(scope)
        while self._pos < len(self._pieces):
            kind, body = self._pieces[self._pos]
            self._pos += 1
            if kind == "text":
                nodes.append(_Node("text", text=body))
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
                nodes.append(_Node("action", pipe=pipe))
        return nodes, None

    def _control(self, word: str, toks: list[_Tok], dot: Kind, scope: dict[str, Kind]) -> _Node:
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
        node = _Node(word, pipe=pipe, body=body)
        if stop is None:
            raise TemplateError(f"unexpected EOF: {word} has no end")
        if stop.startswith("else"):
            rest = stop[len("else") :].strip()
            if rest.startswith(("if ", "with ")):
                # ``else if`` / ``else with``: an if/with nested in the else branch; it consumes the shared end.
                sub_word, _, sub_rest = rest.partition(" ")
                node.orelse = [self._control(sub_word, _lex_action(sub_rest), dot, scope)]
                return node
            elif rest:
                raise TemplateError(f"unexpected {rest!r} after else")
            else:
                node.orelse, stop = self._list(dot, scope)
            if stop != "end":
                raise TemplateError(f"expected end; found {stop}")
        elif stop != "end":
            raise TemplateError(f"unexpected {stop!r}")
        return node

    def _pipe(
        self, toks: list[_Tok], dot: Kind, scope: dict[str, Kind], *, declare: bool, ranging: bool = False
    ) -> _Pipe:
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
        cmds: list[list[_Operand]] = [[]]
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
                cmds[-1].append(_Operand("pipe", pipe=sub))
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
        pipe = _Pipe(decl, assign, tuple(tuple(c) for c in cmds))
        if decl and not ranging:
            scope[decl[0]] = self._kind(pipe, dot, scope)
        elif decl:
            for name in decl:
                scope.setdefault(name, "any")
        return pipe

    def _operand(self, tok: _Tok, dot: Kind, scope: dict[str, Kind]) -> _Operand:
        if tok.kind == "field":
            chain = tuple(tok.text[1:].split("."))
            self._check_chain(dot, chain)
            return _Operand("field", chain=chain)
        if tok.kind == "dot":
            return _Operand("dot")
        if tok.kind == "var":
            name, _, rest = tok.text.partition(".")
            if name not in scope:
                raise TemplateError(f"undefined variable {name!r}")
            chain = tuple(rest.split(".")) if rest else ()
            self._check_chain(scope[name], chain)
            return _Operand("var", name=name, chain=chain)
        if tok.kind == "str":
            return _Operand("str", value=_unquote(tok.text))
        if tok.kind == "raw":
            return _Operand("str", value=tok.text[1:-1])
        if tok.kind == "num":
            return _Operand("int", value=int(tok.text))
        if tok.kind == "ident":
            if tok.text in ("true", "false"):
                return _Operand("bool", value=tok.text == "true")
            if tok.text in _GO_BUILTINS_NOT_HERE:
                raise TemplateError(f"function {tok.text!r} is a Go template builtin this adapter does not implement")
            if tok.text not in _BUILTINS:
                raise TemplateError(f'function "{tok.text}" not defined')
            return _Operand("ident", name=tok.text)
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

    def _kind(self, pipe: _Pipe, dot: Kind, scope: Mapping[str, Kind]) -> Kind:
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


# --- execution ------------------------------------------------------------------------------------------------


def go_format(value: object) -> str:
    """A value as Go's ``fmt`` ``%v`` prints it."""
    if value is NO_VALUE:
        return "<no value>"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, Struct):
        return "{" + " ".join(go_format(v) for v in value.values()) + "}"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_format(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    return str(value)


def _truth(value: object) -> bool:
    if value is NO_VALUE or value is None:
        return False
    if isinstance(value, (str, list, tuple, dict, int, bool)):
        return bool(value)
    return True


def _printf(fmt: str, args: Sequence[object]) -> str:
    out: list[str] = []
    it = iter(args)
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%" or i + 1 >= len(fmt):
            out.append(ch)
            i += 1
            continue
        verb = fmt[i + 1]
        i += 2
        if verb == "%":
            out.append("%")
            continue
        arg = next(it, NO_VALUE)
        if arg is NO_VALUE:
            out.append(f"%!{verb}(MISSING)")
        elif verb in "sv" or (verb == "d" and isinstance(arg, int)):
            out.append(go_format(arg))
        elif verb == "q" and isinstance(arg, str):
            out.append('"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"')
        else:
            raise TemplateError(f"printf verb %{verb} is not supported here")
    extra = list(it)
    if extra:
        out.append("%!(EXTRA " + ", ".join(go_format(a) for a in extra) + ")")
    return "".join(out)


def _compare(name: str, a: object, b: object) -> bool:
    if type(a) is not type(b) or not isinstance(a, (str, int, bool)):
        raise TemplateError(f"error calling {name}: incompatible types for comparison")
    if name in ("eq", "ne"):
        return (a == b) == (name == "eq")
    if isinstance(a, bool):
        raise TemplateError(f"error calling {name}: invalid type for comparison")
    ops: dict[str, Callable[[object, object], bool]] = {
        "lt": lambda x, y: x < y,  # type: ignore[operator]
        "le": lambda x, y: x <= y,  # type: ignore[operator]
        "gt": lambda x, y: x > y,  # type: ignore[operator]
        "ge": lambda x, y: x >= y,  # type: ignore[operator]
    }
    return ops[name](a, b)


def _index(item: object, keys: Sequence[object]) -> object:
    for key in keys:
        if isinstance(item, dict) and not isinstance(item, Struct):
            if not isinstance(key, str):
                raise TemplateError("error calling index: value has type int; should be string")
            item = item.get(key, "")
        elif isinstance(item, (list, tuple, str)):
            if not isinstance(key, int) or isinstance(key, bool):
                raise TemplateError("error calling index: cannot index slice/array with a non-integer")
            if not 0 <= key < len(item):
                raise TemplateError(f"error calling index: index out of range: {key}")
            item = item[key] if not isinstance(item, str) else item.encode()[key]
        else:
            raise TemplateError(f"error calling index: can't index item of type {type(item).__name__}")
    return item


class _Exec:
    def __init__(self, data: Struct) -> None:
        self._root = data

    def nodes(self, nodes: Sequence[_Node], dot: object, scope: dict[str, object], out: list[str]) -> None:
        for node in nodes:
            if node.kind == "text":
                out.append(node.text)
            elif node.kind == "action":
                assert node.pipe is not None
                value = self.pipe(node.pipe, dot, scope)
                if not node.pipe.decl:
                    out.append(go_format(value))
            else:
                self.control(node, dot, scope, out)

    def control(self, node: _Node, dot: object, scope: dict[str, object], out: list[str]) -> None:
        assert node.pipe is not None
        inner = dict(scope)
        if node.kind == "range":
            value = self.pipe(node.pipe, dot, inner, ranging=True)
            items: list[tuple[object, object]]
            if isinstance(value, dict):
                items = [(k, value[k]) for k in sorted(value)]
            elif isinstance(value, (list, tuple)):
                items = list(enumerate(value))
            elif isinstance(value, int) and not isinstance(value, bool):
                items = [(i, i) for i in range(value)]
            elif value is None or value is NO_VALUE:
                items = []
            else:
                raise TemplateError(f"range can't iterate over {go_format(value)}")
            if not items:
                self.nodes(node.orelse, dot, scope, out)
            for key, element in items:
                if len(node.pipe.decl) == 2:
                    inner[node.pipe.decl[0]] = key
                if node.pipe.decl:
                    inner[node.pipe.decl[-1]] = element
                self.nodes(node.body, element, inner, out)
            return
        value = self.pipe(node.pipe, dot, inner)
        if _truth(value):
            self.nodes(node.body, value if node.kind == "with" else dot, inner, out)
        else:
            self.nodes(node.orelse, dot, scope, out)

    def pipe(self, pipe: _Pipe, dot: object, scope: dict[str, object], ranging: bool = False) -> object:
        value: object = NO_VALUE
        for i, cmd in enumerate(pipe.cmds):
            final = () if i == 0 else (value,)
            value = self.command(cmd, dot, scope, final)
        if pipe.decl and not ranging:
            scope[pipe.decl[0]] = value
        return value

    def command(
        self, cmd: Sequence[_Operand], dot: object, scope: dict[str, object], final: tuple[object, ...]
    ) -> object:
        head = cmd[0]
        if head.kind != "ident":
            if final:
                raise TemplateError("can't give argument to non-function")
            return self.operand(head, dot, scope)
        name = head.name
        if name in ("and", "or"):
            # Short-circuit: the first falsy (and) / truthy (or) argument, else the last.
            result: object = NO_VALUE
            for op in list(cmd[1:]) + [_Operand("value", value=f) for f in final]:  # type: ignore[arg-type]
                result = self.operand(op, dot, scope)
                if _truth(result) != (name == "and"):
                    return result
            return result
        args = [self.operand(op, dot, scope) for op in cmd[1:]] + list(final)
        return _call(name, args)

    def operand(self, op: _Operand, dot: object, scope: dict[str, object]) -> object:
        if op.kind == "value":
            return op.value
        if op.kind in ("str", "int", "bool"):
            return op.value
        if op.kind == "dot":
            return dot
        if op.kind == "pipe":
            assert op.pipe is not None
            return self.pipe(op.pipe, dot, dict(scope))
        value: object = dot
        if op.kind == "var":
            value = self._root if op.name == "$" else scope[op.name]
        for name in op.chain:
            if isinstance(value, Struct):
                if name not in value:
                    raise TemplateError(f"can't evaluate field {name}")
                value = value[name]
            elif isinstance(value, dict):
                value = value.get(name, NO_VALUE)
            else:
                raise TemplateError(f"can't evaluate field {name} in type {type(value).__name__}")
        return value


def _call(name: str, args: list[object]) -> object:
    if name == "not":
        if len(args) != 1:
            raise TemplateError("wrong number of args for not: want 1")
        return not _truth(args[0])
    if name == "len":
        if len(args) != 1 or not isinstance(args[0], (str, list, tuple, dict)):
            raise TemplateError("error calling len: len of this type")
        item = args[0]
        return len(item.encode()) if isinstance(item, str) else len(item)
    if name == "index":
        if not args:
            raise TemplateError("wrong number of args for index: want at least 1")
        return _index(args[0], args[1:])
    if name == "print":
        # fmt.Sprint: a space between operands when neither side is a string.
        parts: list[str] = []
        for i, a in enumerate(args):
            if i and not isinstance(a, str) and not isinstance(args[i - 1], str):
                parts.append(" ")
            parts.append(go_format(a))
        return "".join(parts)
    if name == "println":
        return " ".join(go_format(a) for a in args) + "\n"
    if name == "printf":
        if not args or not isinstance(args[0], str):
            raise TemplateError("wrong type for printf format")
        return _printf(args[0], args[1:])
    if len(args) < 2 or (name != "eq" and len(args) != 2):
        raise TemplateError(f"wrong number of args for {name}")
    if name == "eq":
        return any(_compare("eq", args[0], b) for b in args[1:])
    return _compare(name, args[0], args[1])


@dataclass(frozen=True)
class Template:
    """A parsed template: ``render(data)`` executes it on a ``Struct`` whose fields are the declared ones."""

    source: str
    _nodes: tuple[_Node, ...] = field(repr=False, compare=False)

    def render(self, data: Struct) -> str:
        """The text the template produces; ``TemplateError`` for what only shows at execution (an index out of
        range, a comparison of a string with a number)."""
        out: list[str] = []
        _Exec(data).nodes(self._nodes, data, {"$": data}, out)
        return "".join(out)


def parse_template(source: str, fields: Mapping[str, Kind]) -> Template:
    """Parse ``source`` for data with ``fields`` (name -> kind); ``TemplateError`` for anything not read."""
    return Template(source, tuple(_Parser(source, fields).parse()))
