"""Execution: a parse tree walked over a template's data, printing values as Go's ``fmt`` does."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from adapter.promadapter.gotemplate.tree import NO_VALUE, Node, Operand, Pipe, Struct, TemplateError, go_format


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

    def nodes(self, nodes: Sequence[Node], dot: object, scope: dict[str, object], out: list[str]) -> None:
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

    def control(self, node: Node, dot: object, scope: dict[str, object], out: list[str]) -> None:
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

    def pipe(self, pipe: Pipe, dot: object, scope: dict[str, object], ranging: bool = False) -> object:
        value: object = NO_VALUE
        for i, cmd in enumerate(pipe.cmds):
            final = () if i == 0 else (value,)
            value = self.command(cmd, dot, scope, final)
        if pipe.decl and not ranging:
            scope[pipe.decl[0]] = value
        return value

    def command(
        self, cmd: Sequence[Operand], dot: object, scope: dict[str, object], final: tuple[object, ...]
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
            for op in list(cmd[1:]) + [Operand("value", value=f) for f in final]:  # type: ignore[arg-type]
                result = self.operand(op, dot, scope)
                if _truth(result) != (name == "and"):
                    return result
            return result
        args = [self.operand(op, dot, scope) for op in cmd[1:]] + list(final)
        return _call(name, args)

    def operand(self, op: Operand, dot: object, scope: dict[str, object]) -> object:
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


def execute(nodes: Sequence[Node], data: Struct) -> str:
    """The text ``nodes`` produce on ``data``; ``TemplateError`` for what only shows at execution."""
    out: list[str] = []
    _Exec(data).nodes(nodes, data, {"$": data}, out)
    return "".join(out)
