"""The values a template works on and the parse tree ``parse`` builds and ``execute`` walks."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Operand:
    """One argument of a command: a field chain, ``.``, a variable (with a chain), a literal, a function name
    (``ident``) or a parenthesised pipeline."""

    kind: str  # field | dot | var | str | int | bool | ident | pipe
    name: str = ""
    chain: tuple[str, ...] = ()
    value: Value = None
    pipe: Pipe | None = None


@dataclass(frozen=True)
class Pipe:
    """Commands joined by ``|`` (each one's result is the last argument of the next), and the variables it
    declares (``$x :=``, ``$i, $v :=``) or assigns (``$x =``)."""

    decl: tuple[str, ...]
    assign: bool
    cmds: tuple[tuple[Operand, ...], ...]


@dataclass(frozen=True)
class Node:
    """Text, an action that prints its pipeline, or ``if``/``range``/``with`` with a body and an else branch."""

    kind: str  # text | action | if | range | with
    text: str = ""
    pipe: Pipe | None = None
    body: tuple[Node, ...] = ()
    orelse: tuple[Node, ...] = ()


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
