"""Kubernetes label selectors: the string syntax of ``labels.Parse`` and the ``metav1.LabelSelector`` JSON.

Behaviour follows kubernetes/apimachinery ``pkg/labels/selector.go`` (lexer, parser, ``NewRequirement``,
``Requirement.Matches``, ``String``), the label key/value rules of ``pkg/util/validation/validation.go``
(``IsQualifiedName``, ``IsValidLabelValue``, ``IsDNS1123Subdomain``) and ``ParseToLabelSelector`` in
``pkg/apis/meta/v1/helpers.go``. Error messages are the ones kubectl v1.32 prints for the same input (newer
apimachinery words two of them differently: "a valid label key" for "a qualified name", "bytes" for
"characters").

Deliberate differences from upstream, each stricter or semantics-preserving:

* Go's lexer reads a NUL byte as the end of the input, so ``"a=b \\x00junk"`` parses as ``a=b`` there. Here
  NUL is an ordinary character, so the key or value holding it fails validation instead of being cut short.
* ``to_label_selector`` turns ``!=`` into ``NotIn`` with one value (the same set of matches; upstream
  ``ParseToLabelSelector`` refuses ``!=``), and keeps a second ``k=v`` on an already-used key as an ``In``
  expression where upstream's map silently keeps only the last value (``a=1,a=2`` would match ``a=2``).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

Operator = Literal["=", "==", "!=", "in", "notin", "exists", "!", "gt", "lt"]

_OPERATORS: tuple[str, ...] = get_args(Operator)
# The order of upstream's ``binaryOperators``; it shows in the "expected: ..." message.
_BINARY_OPERATORS_TEXT = "in, notin, =, ==, !=, gt, lt"
_SET_OPERATORS = frozenset({"in", "notin"})
_EXACT_OPERATORS = frozenset({"=", "!="})
_UNARY_OPERATORS = frozenset({"exists", "!"})
_INT_OPERATORS = frozenset({"gt", "lt"})

# --- validation (pkg/util/validation/validation.go, messages as of kubectl v1.32) -------------------------

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_QUALIFIED_NAME_MAX = 63
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MAX = 63
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must"
    " start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must"
    " start and end with an alphanumeric character"
)
_INT64_RE = re.compile("[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # validation.RegexError, including its doubled space before " or ".
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _byte_len(text: str) -> int:
    # Go's len() counts UTF-8 bytes; surrogatepass keeps lone surrogates countable instead of raising.
    return len(text.encode("utf-8", "surrogatepass"))


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def _qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName: ``[prefix/]name``, prefix a DNS-1123 subdomain, name ≤ 63 characters."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _dns1123_subdomain_errors(prefix))
    else:
        example = _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        suffix = "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        return [f"a qualified name {example} {suffix}"]
    if not name:
        errs.append("name part must be non-empty")
    elif _byte_len(name) > _QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len_error(_QUALIFIED_NAME_MAX))
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        errs.append(
            "name part " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def _label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue: empty, or ≤ 63 characters of the qualified-name alphabet."""
    errs = []
    if _byte_len(value) > _LABEL_VALUE_MAX:
        errs.append(_max_len_error(_LABEL_VALUE_MAX))
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_quote(text: str) -> str:
    """Go's ``%q`` (strconv.Quote): printable characters as they are, the rest escaped.

    Besides matching upstream messages, this keeps control characters and lone surrogates out of error
    text that ends up in a JSON ``Status`` body.
    """
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and not 0xD800 <= code <= 0xDFFF:
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _shown(literal: str) -> str:
    """A token as echoed in "found '...'" messages: raw like upstream, except lone surrogates.

    A lone surrogate cannot be encoded as UTF-8, so left raw it would break the JSON Status body
    that carries the message; Go would echo the invalid bytes raw instead.
    """
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", literal)


def _invalid(path: str, value: str, details: Iterable[str]) -> str:
    # field.Invalid(path, value, strings.Join(errs, "; ")).Error()
    return f"{path}: Invalid value: {_go_quote(value)}: " + "; ".join(details)


def _invalid_list(path: str, values: tuple[str, ...], detail: str) -> str:
    # A slice as the bad value is rendered as JSON by field.Error.ErrorBody.
    return f"{path}: Invalid value: {json.dumps(list(values), separators=(',', ':'))}: {detail}"


def _aggregate(messages: list[str]) -> str:
    # utilerrors.NewAggregate(...).Error(): duplicates dropped, one message bare, several in brackets.
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign and ASCII digits only, within int64, else None.

    Python's int() would also take underscores, surrounding whitespace and non-ASCII digits.
    """
    if _INT64_RE.fullmatch(text) is None:
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


# --- the model ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    """One clause of a selector, validated like upstream ``labels.NewRequirement``.

    Construction normalizes ``==`` to ``=`` and sorts and de-duplicates the values of ``in``/``notin``, so
    equal clauses compare equal. It raises ValueError when the key is not a qualified name, a value is
    not a label value, ``in``/``notin`` have no value, ``=``/``!=``/``gt``/``lt`` do not have exactly one,
    ``exists``/``!`` have any, or a ``gt``/``lt`` value is not a base-10 int64.
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        operator: str = self.operator
        if operator == "==":
            operator = "="
        values = tuple(self.values)
        if operator in _SET_OPERATORS:
            values = tuple(sorted(set(values)))
        object.__setattr__(self, "operator", operator)
        object.__setattr__(self, "values", values)

        errors: list[str] = []
        key_errors = _qualified_name_errors(self.key)
        if key_errors:
            errors.append(_invalid("key", self.key, key_errors))
        if operator in _SET_OPERATORS and not values:
            errors.append(_invalid_list("values", values, "for 'in', 'notin' operators, values set can't be empty"))
        elif operator in _EXACT_OPERATORS and len(values) != 1:
            errors.append(_invalid_list("values", values, "exact-match compatibility requires one single value"))
        elif operator in _UNARY_OPERATORS and values:
            errors.append(_invalid_list("values", values, "values set must be empty for exists and does not exist"))
        elif operator in _INT_OPERATORS:
            if len(values) != 1:
                errors.append(
                    _invalid_list("values", values, "for 'Gt', 'Lt' operators, exactly one value is required")
                )
            for i, value in enumerate(values):
                if _parse_int64(value) is None:
                    errors.append(
                        _invalid(f"values[{i}]", value, ["for 'Gt', 'Lt' operators, the value must be an integer"])
                    )
        elif operator not in _OPERATORS:
            supported = ", ".join(f'"{op}"' for op in _OPERATORS if op != "==")
            errors.append(f"operator: Unsupported value: {_go_quote(operator)}: supported values: {supported}")
        for i, value in enumerate(values):
            value_errors = _label_value_errors(value)
            if value_errors:
                errors.append(_invalid(f"values[{i}][{self.key}]", value, value_errors))
        if errors:
            raise ValueError(_aggregate(errors))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this clause (upstream ``Requirement.Matches``).

        ``!=`` and ``notin`` match when the key is absent; ``gt``/``lt`` need the key present with a
        base-10 int64 value.
        """
        present = self.key in labels
        op = self.operator
        if op in ("=", "in"):
            return present and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if op == "exists":
            return present
        if op == "!":
            return not present
        if not present:
            return False
        actual = _parse_int64(labels[self.key])
        bound = _parse_int64(self.values[0])
        if actual is None or bound is None:
            return False
        return actual > bound if op == "gt" else actual < bound

    def __str__(self) -> str:
        """The clause in selector syntax (upstream ``Requirement.String``)."""
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return "!" + self.key
        if op in _SET_OPERATORS:
            return f"{self.key} {op} ({','.join(self.values)})"
        symbol = {"=": "=", "!=": "!=", "gt": ">", "lt": "<"}[op]
        return self.key + symbol + self.values[0]


_LABEL_SELECTOR_OPERATORS = {
    "in": "In",
    "notin": "NotIn",
    "!=": "NotIn",
    "exists": "Exists",
    "!": "DoesNotExist",
}


@dataclass(frozen=True)
class Selector:
    """A conjunction of requirements; ``requirements`` are kept sorted by key (stable for equal keys)."""

    requirements: tuple[Requirement, ...]

    def __post_init__(self) -> None:
        # Upstream sorts by key after parsing so String() is deterministic; Python's sort is stable.
        object.__setattr__(self, "requirements", tuple(sorted(self.requirements, key=lambda r: r.key)))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every requirement matches (the empty selector matches everything)."""
        return all(r.matches(labels) for r in self.requirements)

    def is_everything(self) -> bool:
        """True when the selector has no requirement, i.e. does not restrict anything."""
        return not self.requirements

    def __str__(self) -> str:
        """Upstream ``String()``: requirements joined by ``,``; ``parse_selector`` reads it back equal."""
        return ",".join(str(r) for r in self.requirements)

    def to_label_selector(self) -> dict[str, object] | None:
        """metav1.LabelSelector JSON as upstream ParseToLabelSelector builds it.

        ``{"matchLabels": {...}}`` for =/==, ``{"matchExpressions": [{"key","operator","values"}]}`` with
        operators In, NotIn, Exists, DoesNotExist (`!=` becomes NotIn with one value); keys present only when
        non-empty; None for an empty selector. gt/lt cannot be represented: raise ValueError.

        A repeated ``=`` key with a different value becomes an ``In`` expression, so the result matches
        exactly what this selector matches.
        """
        if not self.requirements:
            return None
        match_labels: dict[str, str] = {}
        expressions: list[dict[str, object]] = []
        for r in self.requirements:
            if r.operator in _INT_OPERATORS:
                raise ValueError(f'"{r.operator}" isn\'t supported in label selectors')
            if r.operator == "=":
                if r.key not in match_labels:
                    match_labels[r.key] = r.values[0]
                    continue
                if match_labels[r.key] == r.values[0]:
                    continue
                expression: dict[str, object] = {"key": r.key, "operator": "In", "values": [r.values[0]]}
            else:
                expression = {"key": r.key, "operator": _LABEL_SELECTOR_OPERATORS[r.operator]}
                if r.values:
                    expression["values"] = list(r.values)
            expressions.append(expression)
        result: dict[str, object] = {}
        if match_labels:
            result["matchLabels"] = match_labels
        if expressions:
            result["matchExpressions"] = expressions
        return result


EVERYTHING: Selector = Selector(())


# --- lexer and parser (pkg/labels/selector.go) --------------------------------------------------------------


class _Tok(enum.Enum):
    END = "end of string"
    CLOSE = ")"
    COMMA = ","
    NOT = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER = ">"
    IDENT = "identifier"
    IN = "in"
    LESS = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN = "("


_KEYWORDS = {t.value: t for t in _Tok if t not in (_Tok.END, _Tok.IDENT)}
_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_Item = tuple[_Tok, str]


def _lex(text: str) -> list[_Item]:
    """Split into tokens; the list always ends with END.

    Special symbols take the longest token (only ``==`` and ``!=`` are two long); any other run of
    characters up to whitespace or a special symbol is an identifier, or ``in``/``notin``.
    """
    items: list[_Item] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            items.append((_Tok.END, ""))
            return items
        if text[i] in _SPECIAL:
            pair = text[i : i + 2]
            symbol = pair if pair in ("==", "!=") else text[i]
            items.append((_KEYWORDS[symbol], symbol))
            i += len(symbol)
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        word = text[start:i]
        items.append((_KEYWORDS.get(word, _Tok.IDENT), word))


class _Parser:
    """Recursive descent over the token list, one method per rule of upstream's parser."""

    def __init__(self, text: str) -> None:
        self._items = _lex(text)
        self._pos = 0

    def _peek(self, values: bool) -> _Item:
        # In a value position the keywords ``in``/``notin`` are plain identifiers ("x in (in)").
        tok, lit = self._items[min(self._pos, len(self._items) - 1)]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENT
        return tok, lit

    def _take(self, values: bool) -> _Item:
        item = self._peek(values)
        self._pos += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._peek(values=True)
            if tok is _Tok.END:
                return requirements
            if tok not in (_Tok.IDENT, _Tok.NOT):
                raise ValueError(f"found '{_shown(lit)}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except ValueError as exc:
                raise ValueError(f"unable to parse requirement: {exc}") from None
            tok, lit = self._take(values=True)
            if tok is _Tok.END:
                return requirements
            if tok is not _Tok.COMMA:
                raise ValueError(f"found '{_shown(lit)}', expected: ',' or 'end of string'")
            tok, lit = self._peek(values=True)
            if tok not in (_Tok.IDENT, _Tok.NOT):
                raise ValueError(f"found '{_shown(lit)}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        negated = False
        tok, key = self._take(values=True)
        if tok is _Tok.NOT:
            negated = True
            tok, key = self._take(values=True)
        if tok is not _Tok.IDENT:
            raise ValueError(f"found '{_shown(key)}', expected: identifier")
        key_errors = _qualified_name_errors(key)
        if key_errors:
            raise ValueError(_invalid("<nil>", key, key_errors))
        # ``!key`` is complete whatever follows: "!a=b" fails later, at the "=", as upstream does.
        if negated:
            return Requirement(key, "!")
        if self._peek(values=True)[0] in (_Tok.END, _Tok.COMMA):
            return Requirement(key, "exists")
        operator = self._operator()
        values = self._value_set() if operator in _SET_OPERATORS else self._exact_value()
        return Requirement(key, operator, tuple(sorted(set(values))))

    def _operator(self) -> Operator:
        tok, lit = self._take(values=False)
        operators: dict[_Tok, Operator] = {
            _Tok.IN: "in",
            _Tok.NOT_IN: "notin",
            _Tok.EQUALS: "=",
            _Tok.DOUBLE_EQUALS: "=",
            _Tok.NOT_EQUALS: "!=",
            _Tok.GREATER: "gt",
            _Tok.LESS: "lt",
        }
        if tok not in operators:
            raise ValueError(f"found '{_shown(lit)}', expected: {_BINARY_OPERATORS_TEXT}")
        return operators[tok]

    def _value_set(self) -> set[str]:
        tok, lit = self._take(values=True)
        if tok is not _Tok.OPEN:
            raise ValueError(f"found '{_shown(lit)}' expected: '('")
        tok, lit = self._peek(values=True)
        if tok is _Tok.CLOSE:
            # "()" is the set holding only the empty string, not an empty set.
            self._take(values=True)
            return {""}
        if tok not in (_Tok.IDENT, _Tok.COMMA):
            raise ValueError(f"found '{_shown(lit)}', expected: ',', ')' or identifier")
        values = self._identifiers()
        self._take(values=True)  # the ")" _identifiers stopped in front of
        return values

    def _identifiers(self) -> set[str]:
        # A comma with nothing on one side of it stands for the empty string: "(,a)", "(a,)", "(a,,b)".
        values: set[str] = set()
        while True:
            tok, lit = self._take(values=True)
            if tok is _Tok.IDENT:
                values.add(lit)
                nxt, nxt_lit = self._peek(values=True)
                if nxt is _Tok.CLOSE:
                    return values
                if nxt is not _Tok.COMMA:
                    raise ValueError(f"found '{_shown(nxt_lit)}', expected: ',' or ')'")
            elif tok is _Tok.COMMA:
                if not values:
                    values.add("")
                nxt = self._peek(values=True)[0]
                if nxt is _Tok.CLOSE:
                    values.add("")
                    return values
                if nxt is _Tok.COMMA:
                    self._take(values=True)
                    values.add("")
            else:
                raise ValueError(f"found '{_shown(lit)}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        if self._peek(values=True)[0] in (_Tok.END, _Tok.COMMA):
            return {""}
        tok, lit = self._take(values=True)
        if tok is not _Tok.IDENT:
            raise ValueError(f"found '{_shown(lit)}', expected: identifier")
        return {lit}


def parse_selector(text: str) -> Selector:
    """Parse like labels.Parse. Empty or whitespace-only text -> EVERYTHING.

    Raise ValueError with an upstream-like message (e.g. 'unable to parse requirement: ...' /
    'found '...', expected: ...') on any error; never any other exception.

    Grammar: requirements separated by ``,``; each is ``key``, ``!key``, ``key (=|==|!=|>|<) value`` or
    ``key (in|notin) (v1,v2,...)``; whitespace (space, tab, CR, LF) may surround any token.
    """
    requirements = _Parser(text).parse()
    return Selector(tuple(requirements)) if requirements else EVERYTHING
