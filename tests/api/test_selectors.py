"""Label selectors: the ``labels.Parse`` syntax, matching, String(), and the ``metav1.LabelSelector`` JSON.

Expected values come from kubernetes/apimachinery ``pkg/labels/selector.go`` and its ``selector_test.go``
(cited per table), and, where kubectl is installed, from kubectl itself: ``kubectl set selector --local``
runs the real ``metav1.ParseToLabelSelector`` (which calls ``labels.ParseToRequirements``) without a
cluster, so its answer is the upstream answer for the same text.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.labels import EVERYTHING, Requirement, Selector, parse_selector

# --- parsing: valid input ----------------------------------------------------------------------------------

# (text, String() of the result, the requirements as (key, operator, values)).
# Cases marked "upstream" are from selector_test.go (TestSelectorParse, TestSetSelectorParser, TestToString).
VALID: list[tuple[str, str, list[tuple[str, str, tuple[str, ...]]]]] = [
    ("app=foo,tier in (a,b)", "app=foo,tier in (a,b)", [("app", "=", ("foo",)), ("tier", "in", ("a", "b"))]),
    ("x=a,y=b,z=c", "x=a,y=b,z=c", [("x", "=", ("a",)), ("y", "=", ("b",)), ("z", "=", ("c",))]),  # upstream
    ("x!=a,y=b", "x!=a,y=b", [("x", "!=", ("a",)), ("y", "=", ("b",))]),  # upstream
    ("x=", "x=", [("x", "=", ("",))]),  # upstream: empty value
    ("x= ,z= ", "x=,z=", [("x", "=", ("",)), ("z", "=", ("",))]),  # upstream
    ("!x", "!x", [("x", "!", ())]),  # upstream
    ("x>1,z<5", "x>1,z<5", [("x", "gt", ("1",)), ("z", "lt", ("5",))]),  # upstream
    ("x==a", "x=a", [("x", "=", ("a",))]),  # "==" is normalized to "="
    ("a!=", "a!=", [("a", "!=", ("",))]),
    ("\rx", "x", [("x", "exists", ())]),  # upstream: CR is whitespace
    ("foo  in\t (abc)", "foo in (abc)", [("foo", "in", ("abc",))]),  # upstream
    ("x notin\n (abc)", "x notin (abc)", [("x", "notin", ("abc",))]),  # upstream
    ("x in (abc,)", "x in (,abc)", [("x", "in", ("", "abc"))]),  # upstream: trailing comma adds ""
    ("x in ()", "x in ()", [("x", "in", ("",))]),  # upstream: "()" is {""}, not an empty set
    ("x in (,)", "x in ()", [("x", "in", ("",))]),
    ("x in (b,,a,b)", "x in (,a,b)", [("x", "in", ("", "a", "b"))]),  # sorted, de-duplicated
    ("x in (,,a)", "x in (,a)", [("x", "in", ("", "a"))]),
    (
        "x notin (abc,def),bar,z in (),w",  # upstream: sorted by key
        "bar,w,x notin (abc,def),z in ()",
        [("bar", "exists", ()), ("w", "exists", ()), ("x", "notin", ("abc", "def")), ("z", "in", ("",))],
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",  # upstream
        "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
        [("0.1.2.domain/99", "notin", ("10.10.100.1", "tick.tack.clock"))],
    ),
    (
        "this-is-a-dns.domain.com/key-with-dash",  # upstream
        "this-is-a-dns.domain.com/key-with-dash",
        [("this-is-a-dns.domain.com/key-with-dash", "exists", ())],
    ),
    ("notin=in", "notin=in", [("notin", "=", ("in",))]),  # upstream: keywords as key and value
    ("in in (in,notin)", "in in (in,notin)", [("in", "in", ("in", "notin"))]),
    ("z=1,a=2,z=0", "a=2,z=1,z=0", [("a", "=", ("2",)), ("z", "=", ("1",)), ("z", "=", ("0",))]),  # stable
    ("x>007", "x>007", [("x", "gt", ("007",))]),
    ("x<9223372036854775807", "x<9223372036854775807", [("x", "lt", ("9223372036854775807",))]),
    (f"{'a' * 63}={'b' * 63}", f"{'a' * 63}={'b' * 63}", [("a" * 63, "=", ("b" * 63,))]),
    (f"{'p' * 253}/k", f"{'p' * 253}/k", [("p" * 253 + "/k", "exists", ())]),
    ("A_b.C-1=V_2.w-3", "A_b.C-1=V_2.w-3", [("A_b.C-1", "=", ("V_2.w-3",))]),
    (" \t\r\n a = b , c \n", "a=b,c", [("a", "=", ("b",)), ("c", "exists", ())]),
]


@pytest.mark.parametrize(("text", "canonical", "expected"), VALID, ids=[repr(v[0])[:40] for v in VALID])
def test_parse_valid(text: str, canonical: str, expected: list[tuple[str, str, tuple[str, ...]]]) -> None:
    selector = parse_selector(text)
    assert [(r.key, r.operator, r.values) for r in selector.requirements] == expected
    assert str(selector) == canonical
    assert parse_selector(canonical) == selector


@pytest.mark.parametrize("text", ["", " ", "\t\r\n  "])
def test_empty_text_is_everything(text: str) -> None:
    selector = parse_selector(text)
    assert selector == EVERYTHING
    assert selector.is_everything()
    assert str(selector) == ""
    assert selector.matches({}) and selector.matches({"any": "thing"})


def test_order_of_clauses_does_not_matter() -> None:
    # upstream TestDeterministicParse
    assert parse_selector("x=a,a=x") == parse_selector("a=x,x=a")
    assert str(parse_selector("x=a,a=x")) == "a=x,x=a"


def test_hpa_selector_from_the_query_string() -> None:
    # The HPA sends its scale selector as labelSelector, encoded by Go's url.Values.Encode
    # (k8s-metrics-protocol.md §1.9): spaces as "+", the rest percent-encoded.
    query = "labelSelector=app%3Dfoo%2Ctier+in+%28a%2Cb%29&metricLabelSelector=verb%3DGET%2Cphase%21%3Dinit"
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    pods = parse_selector(params["labelSelector"][0])
    assert str(pods) == "app=foo,tier in (a,b)"
    assert pods.matches({"app": "foo", "tier": "b", "pod-template-hash": "7d5f9c8b4"})
    assert not pods.matches({"app": "foo", "tier": "c"})
    assert not pods.matches({"app": "foo"})
    metric = parse_selector(params["metricLabelSelector"][0])
    assert metric.to_label_selector() == {
        "matchLabels": {"verb": "GET"},
        "matchExpressions": [{"key": "phase", "operator": "NotIn", "values": ["init"]}],
    }


def test_form_decoding_with_percent_encoded_spaces_and_plus() -> None:
    # %20 and + both decode to a space; both forms reach the parser as the same text.
    for raw in ("tier%20notin%20%28a%2C%29", "tier+notin+%28a%2C%29"):
        text = urllib.parse.parse_qs("s=" + raw)["s"][0]
        assert parse_selector(text) == Selector((Requirement("tier", "notin", ("", "a")),))


# --- parsing: invalid input ---------------------------------------------------------------------------------

_KEY_REGEX_HINT = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric"
    " character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is"
    " '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_REGEX_HINT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must"
    " start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used"
    " for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

_INTEGER = "for 'Gt', 'Lt' operators, the value must be an integer"
_PREFIX_HINT = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or"
    " '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for"
    " validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_SLASHES_SUFFIX = "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
_SLASHES_HINT = f"a qualified name {_KEY_REGEX_HINT} {_SLASHES_SUFFIX}"


def _req(detail: str) -> str:
    return "unable to parse requirement: " + detail


def _bad_key(quoted: str, detail: str) -> str:
    return _req(f"<nil>: Invalid value: {quoted}: {detail}")


def _bad_value(path: str, quoted: str, detail: str) -> str:
    return f"{path}: Invalid value: {quoted}: {detail}"


# (text, the whole error message). The messages are what kubectl v1.32 prints after
# `couldn't parse the selector string "<text>": ` for the same text (checked live by the kubectl test below).
INVALID: list[tuple[str, str]] = [
    ("x=a||y=b", _req(_bad_value("values[0][x]", '"a||y"', _VALUE_REGEX_HINT))),  # upstream bad string
    ("x==a==b", "found '==', expected: ',' or 'end of string'"),  # upstream bad string
    ("!x=a", "found '=', expected: ',' or 'end of string'"),  # upstream bad string
    ("x<a", _req(_bad_value("values[0]", '"a"', _INTEGER))),  # upstream bad string
    ("x>-5", _req(_bad_value("values[0][x]", '"-5"', _VALUE_REGEX_HINT))),  # a sign is not a label value
    ("x<9223372036854775808", _req(_bad_value("values[0]", '"9223372036854775808"', _INTEGER))),
    ("x>1_0", _req(_bad_value("values[0]", '"1_0"', _INTEGER))),
    ("x>", _req(_bad_value("values[0]", '""', _INTEGER))),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("a,", "found '', expected: identifier after ','"),
    ("a,,b", "found ',', expected: identifier after ','"),
    ("(", "found '(', expected: !, identifier, or 'end of string'"),
    ("a b", _req("found 'b', expected: in, notin, =, ==, !=, gt, lt")),
    ("a!b", _req("found '!', expected: in, notin, =, ==, !=, gt, lt")),
    ("a<=b", _req("found '=', expected: identifier")),
    ("a=(b)", _req("found '(', expected: identifier")),
    ("a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("a in b", _req("found 'b' expected: '('")),
    ("a notin", _req("found '' expected: '('")),
    ("a in (b c)", _req("found 'c', expected: ',' or ')'")),
    ("a in (b", _req("found '', expected: ',' or ')'")),
    ("a in (,", _req("found '', expected: ',', or identifier")),
    ("a in (!)", _req("found '!', expected: ',', ')' or identifier")),
    # upstream quirk: two commas right before ")" are refused, while "(,,a)" and "(a,,b)" are fine
    ("a in (,,)", _req("found ')', expected: ',', or identifier")),
    ("a in (a,,)", _req("found ')', expected: ',', or identifier")),
    ("!", _req("found '', expected: identifier")),
    ("!!a", _req("found '!', expected: identifier")),
    ("-a", _bad_key('"-a"', "name part " + _KEY_REGEX_HINT)),
    ("/a", _bad_key('"/a"', "prefix part must be non-empty")),
    ("a/", _bad_key('"a/"', "name part must be non-empty; name part " + _KEY_REGEX_HINT)),
    ("a/b/c", _bad_key('"a/b/c"', _SLASHES_HINT)),
    ("Bad.Prefix/x", _bad_key('"Bad.Prefix/x"', _PREFIX_HINT)),
    ("p" * 254 + "/k", _bad_key(f'"{"p" * 254}/k"', "prefix part must be no more than 253 characters")),
    ("a" * 64, _bad_key(f'"{"a" * 64}"', "name part must be no more than 63 characters")),
    (
        "a=" + "b" * 64,
        _req(_bad_value("values[0][a]", f'"{"b" * 64}"', "must be no more than 63 characters")),
    ),
    (
        "x in (-a,-b)",
        _req(
            "["
            + _bad_value("values[0][x]", '"-a"', _VALUE_REGEX_HINT)
            + ", "
            + _bad_value("values[1][x]", '"-b"', _VALUE_REGEX_HINT)
            + "]"
        ),
    ),
    (
        "x>_",
        _req(
            "["
            + _bad_value("values[0]", '"_"', _INTEGER)
            + ", "
            + _bad_value("values[0][x]", '"_"', _VALUE_REGEX_HINT)
            + "]"
        ),
    ),
    # Go's %q quoting of the bad value: control characters and non-printable runes escaped, é kept.
    ("a\x01", _bad_key('"a\\x01"', "name part " + _KEY_REGEX_HINT)),
    ("a=é", _req(_bad_value("values[0][a]", '"é"', _VALUE_REGEX_HINT))),
    ("a\x7f\x85\u2028", _bad_key('"a\\x7f\\u0085\\u2028"', "name part " + _KEY_REGEX_HINT)),
    # Only space, tab, CR and LF separate tokens; other Unicode spaces are part of an identifier.
    ("a\u00a0=b", _bad_key('"a\\u00a0"', "name part " + _KEY_REGEX_HINT)),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[repr(v[0])[:40] for v in INVALID])
def test_parse_invalid(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_selector(text)
    assert str(caught.value) == message


@pytest.mark.parametrize("text", ["a=b \x00junk", "\x00", "a\x00", "a=b\x00", "a,\x00"])
def test_nul_is_not_an_end_of_input(text: str) -> None:
    # Go's lexer stops at a NUL byte, so upstream reads "a=b \x00junk" as "a=b"; we refuse it instead.
    with pytest.raises(ValueError):
        parse_selector(text)


def test_lone_surrogates_are_escaped_in_messages() -> None:
    # They cannot be encoded as UTF-8; a message holding one raw would break the JSON Status body.
    for text in ("a=b \ud800", "\udfff=b", "a=\ud800", "a in (x \ud800)"):
        with pytest.raises(ValueError) as caught:
            parse_selector(text)
        assert "\\ud" in str(caught.value)
        str(caught.value).encode("utf-8")


# --- matching -----------------------------------------------------------------------------------------------

# upstream TestSelectorMatches and TestRequirementSelectorMatching, plus the absent-key rules.
MATCHES: list[tuple[str, dict[str, str], bool]] = [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
    ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
    ("x notin (),y", {"y": ""}, True),
    ("!x,y", {"y": ""}, True),
    ("x notin (),!y", {"y": ""}, False),
    ("x in ()", {"y": "baz"}, False),
    ("x in ()", {"x": ""}, True),
    ("z>1", {"z": "v2"}, False),
    # != and notin match an absent key; gt/lt need it present and integer-valued.
    ("x!=a", {}, True),
    ("x notin (a,b)", {}, True),
    ("x notin (a,b)", {"x": "b"}, False),
    ("x>1", {}, False),
    ("x<5", {"x": ""}, False),
    ("x<5", {"x": "4.5"}, False),
    ("x>5", {"x": "+6"}, True),  # strconv.ParseInt accepts a sign
    ("x<5", {"x": "-6"}, True),
    ("x>5", {"x": "1_0"}, False),  # ... but not Python's digit separators
    ("x>5", {"x": "\uff19"}, False),  # ... nor non-ASCII digits (fullwidth 9)
    ("x>5", {"x": "99999999999999999999"}, False),  # out of int64 range
    ("x=", {"x": ""}, True),
    ("x=", {}, False),
    # duplicate keys: every clause must hold
    ("x=a,x=b", {"x": "a"}, False),
    ("x,x!=a", {"x": "b"}, True),
    ("x,x!=a", {}, False),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES, ids=[f"{m[0]}|{m[1]}" for m in MATCHES])
def test_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


# --- Requirement construction ------------------------------------------------------------------------------


def test_requirement_normalizes() -> None:
    assert Requirement("x", "==", ("a",)) == Requirement("x", "=", ("a",))
    assert Requirement("x", "in", ("b", "a", "b")).values == ("a", "b")
    assert Requirement("x", "notin", ["b", "a"]).values == ("a", "b")  # type: ignore[arg-type]
    assert hash(Requirement("x", "in", ("b", "a"))) == hash(Requirement("x", "in", ("a", "b")))


# upstream TestRequirementConstructor, and the per-operator value counts of NewRequirement.
@pytest.mark.parametrize(
    ("key", "operator", "values", "ok"),
    [
        ("x", "in", (), False),
        ("x", "notin", (), False),
        ("x", "in", ("foo",), True),
        ("x", "notin", ("foo",), True),
        ("x", "exists", (), True),
        ("x", "!", (), True),
        ("x", "exists", ("a",), False),
        ("x", "!", ("a",), False),
        ("1foo", "in", ("bar",), True),
        ("1234", "in", ("bar",), True),
        ("y", "gt", ("1",), True),
        ("z", "lt", ("6",), True),
        ("foo", "gt", ("bar",), False),
        ("barz", "lt", ("blah",), False),
        ("y", "gt", ("1", "2"), False),
        ("x", "=", (), False),
        ("x", "=", ("a", "b"), False),
        ("x", "!=", ("a", "b"), False),
        ("a" * 254, "exists", (), False),
        ("x", "like", ("a",), False),
        ("x", "in", ("ok", "not ok"), False),
    ],
)
def test_requirement_validation(key: str, operator: str, values: tuple[str, ...], ok: bool) -> None:
    if ok:
        assert Requirement(key, operator, values).key == key  # type: ignore[arg-type]
    else:
        with pytest.raises(ValueError):
            Requirement(key, operator, values)  # type: ignore[arg-type]


def test_requirement_error_names_the_field() -> None:
    with pytest.raises(ValueError, match=r'^key: Invalid value: "-x": name part must consist'):
        Requirement("-x", "exists")
    with pytest.raises(ValueError, match=r"^values: Invalid value: \[\]: for 'in', 'notin' operators"):
        Requirement("x", "in", ())
    with pytest.raises(ValueError, match=r'^operator: Unsupported value: "like": supported values: "="'):
        Requirement("x", "like", ("a",))  # type: ignore[arg-type]


def test_selector_sorts_its_requirements() -> None:
    b, a1, a2 = Requirement("b", "exists"), Requirement("a", "=", ("1",)), Requirement("a", "=", ("2",))
    selector = Selector((b, a1, a2))
    assert selector.requirements == (a1, a2, b)
    assert str(selector) == "a=1,a=2,b"
    assert selector == parse_selector("b,a=1,a=2")


# --- metav1.LabelSelector -----------------------------------------------------------------------------------

LABEL_SELECTORS: list[tuple[str, dict[str, object] | None]] = [
    ("", None),
    ("verb=GET", {"matchLabels": {"verb": "GET"}}),
    ("verb==GET,code=200", {"matchLabels": {"code": "200", "verb": "GET"}}),
    ("a=", {"matchLabels": {"a": ""}}),
    (
        "app=foo,tier in (b,a),!x,y,z notin (c)",
        {
            "matchLabels": {"app": "foo"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "x", "operator": "DoesNotExist"},
                {"key": "y", "operator": "Exists"},
                {"key": "z", "operator": "NotIn", "values": ["c"]},
            ],
        },
    ),
    ("x in ()", {"matchExpressions": [{"key": "x", "operator": "In", "values": [""]}]}),
    ("phase!=init", {"matchExpressions": [{"key": "phase", "operator": "NotIn", "values": ["init"]}]}),
    ("a=1,a=1", {"matchLabels": {"a": "1"}}),
    (
        "a=1,a=2",  # upstream keeps only a=2 in its map; an In clause keeps the meaning
        {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "a", "operator": "In", "values": ["2"]}]},
    ),
]


@pytest.mark.parametrize(("text", "expected"), LABEL_SELECTORS, ids=[v[0] or "empty" for v in LABEL_SELECTORS])
def test_to_label_selector(text: str, expected: dict[str, object] | None) -> None:
    result = parse_selector(text).to_label_selector()
    assert result == expected
    # It is JSON as the wire wants it, key order included (Go marshals map keys sorted).
    assert json.dumps(result) == json.dumps(expected)


@pytest.mark.parametrize("text", ["x>1", "a=b,x<1", "a,z>0"])
def test_to_label_selector_refuses_gt_lt(text: str) -> None:
    with pytest.raises(ValueError, match=r"^\"(gt|lt)\" isn't supported in label selectors$"):
        parse_selector(text).to_label_selector()


def _label_selector_matches(label_selector: Mapping[str, object] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector semantics, written independently of the module under test."""
    if label_selector is None:
        return True
    match_labels = label_selector.get("matchLabels", {})
    assert isinstance(match_labels, dict)
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    expressions = label_selector.get("matchExpressions", [])
    assert isinstance(expressions, list)
    for expr in expressions:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# --- property tests -----------------------------------------------------------------------------------------

_KEYS = ["a", "app", "tier", "in", "notin", "x.y/z", "example.com/Key_1", "A-b.c"]
_VALUES = ["", "a", "b", "in", "notin", "GET", "v1.2_3-x", "0", "7", "12"]
_SPACE = st.sampled_from(["", " ", "\t", "  ", "\n", "\r\n "])


@st.composite
def _requirement_text(draw: st.DrawFn) -> str:
    key = draw(st.sampled_from(_KEYS) | st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?\Z"))
    value = st.sampled_from(_VALUES)
    s1, s2 = draw(_SPACE), draw(_SPACE)
    kind = draw(st.sampled_from(["exists", "!", "=", "==", "!=", ">", "<", "in", "notin"]))
    if kind == "exists":
        return key
    if kind == "!":
        return f"!{s1}{key}"
    if kind in ("in", "notin"):
        # unique: at most one "" so the text never holds ",,)", which upstream refuses (see INVALID)
        items = draw(st.lists(value, max_size=4, unique=True))
        return f"{key} {kind}{s1}({','.join(items)}){s2}"
    if kind in (">", "<"):
        number = draw(st.integers(min_value=0, max_value=2**63 - 1))
        return f"{key}{s1}{kind}{s2}{number}"
    return f"{key}{s1}{kind}{s2}{draw(value)}"


_SELECTOR_TEXT = st.lists(_requirement_text(), max_size=6).flatmap(
    lambda reqs: _SPACE.map(lambda space: (space + "," + space).join(reqs))
)
_PIECES = [
    "=",
    "==",
    "!=",
    "!",
    "(",
    ")",
    ",",
    ">",
    "<",
    " ",
    "\t",
    "\n",
    "in",
    "notin",
    "a",
    "b",
    "",
    "/",
    "-",
    "1",
]
_SOUP = st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=30).map("".join)
_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=300)  # includes controls and surrogates


@given(st.one_of(_ANY_TEXT, _SOUP, _SELECTOR_TEXT, st.text(min_size=1000, max_size=5000)))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hostile_text_only_ever_raises_value_error(text: str) -> None:
    try:
        selector = parse_selector(text)
    except ValueError as exc:
        # The message must be safe to put in a JSON Status body: it encodes as UTF-8.
        str(exc).encode("utf-8")
        return
    assert isinstance(selector, Selector)


@given(st.one_of(_SELECTOR_TEXT, _SOUP))
@settings(max_examples=600, deadline=None)
def test_string_form_round_trips(text: str) -> None:
    try:
        selector = parse_selector(text)
    except ValueError:
        return
    canonical = str(selector)
    again = parse_selector(canonical)
    assert again == selector
    assert str(again) == canonical


_LABELS = st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(_VALUES), max_size=5)


@given(_SELECTOR_TEXT, _LABELS)
@settings(max_examples=600, deadline=None)
def test_label_selector_json_keeps_the_meaning(text: str, labels: dict[str, str]) -> None:
    selector = parse_selector(text)
    if any(r.operator in ("gt", "lt") for r in selector.requirements):
        with pytest.raises(ValueError):
            selector.to_label_selector()
        return
    assert _label_selector_matches(selector.to_label_selector(), labels) is selector.matches(labels)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a" * 1_000_000, 'unable to parse requirement: <nil>: Invalid value: "aaaa'),
        ("a=" + "b" * 1_000_000, 'unable to parse requirement: values[0][a]: Invalid value: "bbbb'),
        ("a-" * 500_000 + "!", 'unable to parse requirement: <nil>: Invalid value: "a-a-'),  # key near-miss
        ("a." * 500_000 + "/b", 'unable to parse requirement: <nil>: Invalid value: "a.a.'),  # DNS-prefix near-miss
        ("x in (" + "," * 300_000 + ")", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("x in (" + "a," * 300_000 + "b)", "x in (a,b)"),  # valid: String() of the parsed selector
        ("(" * 300_000, "found '(', expected: !, identifier, or 'end of string'"),
        ("!" * 300_000, "unable to parse requirement: found '!', expected: identifier"),
        ("=" * 300_000, "found '==', expected: !, identifier, or 'end of string'"),
        ("a=b," * 50_000 + "!", "unable to parse requirement: found '', expected: identifier"),
        ("\x00" * 100_000, 'unable to parse requirement: <nil>: Invalid value: "\\x00\\x00'),
        ("\ud800" * 100_000, 'unable to parse requirement: <nil>: Invalid value: "\\ud800\\ud800'),
    ],
    ids=lambda t: repr(t[:12]),
)
def test_very_long_input_ends(text: str, want: str) -> None:
    # No timing assertion: the test has to finish, with the right error or Selector.
    try:
        got = str(parse_selector(text))
    except ValueError as exc:
        got = str(exc)
    assert got.startswith(want), got[:120]


def test_many_clauses_parse() -> None:
    selector = parse_selector(",".join(f"k{i % 97}=v{i}" for i in range(50_000)))
    assert len(selector.requirements) == 50_000
    assert [r.key for r in selector.requirements] == sorted(r.key for r in selector.requirements)


# --- differential test against kubectl (upstream Go code) ---------------------------------------------------

_SERVICE = """apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80}]
"""
_GO_OPERATORS = {"in": "In", "notin": "NotIn", "exists": "Exists", "!": "DoesNotExist"}


def _kubectl_outcome(kubectl: str, workdir: Path, text: str) -> tuple[str, object]:
    """What kubectl makes of ``text``: ("labels", matchLabels) on success, else ("error", stderr)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(workdir), "KUBECONFIG": str(workdir / "none")}
    proc = subprocess.run(
        [kubectl, "set", "selector", "--local", "-f", str(workdir / "svc.yaml"), "-o", "json", "--", text],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    if proc.returncode == 0:
        return "labels", json.loads(proc.stdout)["spec"].get("selector", {})
    return "error", proc.stderr.decode("utf-8", "replace").rstrip("\n")


def _expected_outcome(text: str) -> tuple[str, object]:
    """What ParseToLabelSelector + `set selector` on a Service should report, derived from our parser."""
    try:
        selector = parse_selector(text)
    except ValueError as exc:
        return "error", f'error: couldn\'t parse the selector string "{text}": {exc}'
    for r in selector.requirements:  # upstream refuses these as it meets them, in key order
        if r.operator == "!=":
            return "error", 'error: "!=" is not a valid label selector operator'
        if r.operator in ("gt", "lt"):
            return "error", f'error: "{r.operator}" isn\'t supported in label selectors'
    expressions = [r for r in selector.requirements if r.operator != "="]
    if expressions:
        # Go's %v of []LabelSelectorRequirement: {Key Operator [v1 v2]}
        shown = " ".join(f"{{{r.key} {_GO_OPERATORS[r.operator]} [{' '.join(r.values)}]}}" for r in expressions)
        return "error", f"error: match expression [{shown}] not supported on this object"
    # Upstream's map keeps the last value of a repeated key.
    return "labels", {r.key: r.values[0] for r in selector.requirements}


def _soup(rng: random.Random) -> str:
    pieces = [
        *["a", "app", "tier", "in", "notin", "x.y/z", "Bad.Prefix/k", "a/b/c", "-a", "a-", "é", "a\x01", "9"],
        *["=", "==", "!=", "!", "(", ")", ",", ">", "<", " ", "\t", "\n", "007", "-5", "1_0", "a" * 64],
        *["9223372036854775807", "9223372036854775808", "\u00a0", "\u2028", "~", "||", "_"],
    ]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 9)))


def _structured(rng: random.Random) -> str:
    """Mostly valid selectors: one to four clauses of every form, with stray whitespace."""
    keys = ["a", "app", "tier", "in", "notin", "x.y/z", "example.com/Key_1", "A-b.c"]
    values = ["", "a", "b", "in", "notin", "GET", "v1.2_3-x", "0", "7"]
    space = ["", " ", "\t", "\n "]
    clauses = []
    for _ in range(rng.randint(1, 4)):
        key, value, sp = rng.choice(keys), rng.choice(values), rng.choice(space)
        # != > < are rare: kubectl stops at the first one, hiding the rest of the selector
        forms = ["exists", "!", "=", "==", "in", "notin", "!=", ">", "<"]
        form = rng.choices(forms, weights=[3, 3, 4, 2, 4, 4, 1, 1, 1])[0]
        if form == "exists":
            clauses.append(key)
        elif form == "!":
            clauses.append(f"!{sp}{key}")
        elif form in ("in", "notin"):
            items = rng.sample(values, rng.randint(0, 4))
            clauses.append(f"{key} {form}{sp}({','.join(items)})")
        elif form in (">", "<"):
            clauses.append(f"{key}{sp}{form}{rng.randint(0, 99)}")
        else:
            clauses.append(f"{key}{sp}{form}{sp}{value}")
    return rng.choice(space).join(c + "," for c in clauses[:-1]) + clauses[-1]


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory, kubectl_path: str) -> tuple[str, Path]:
    binary = kubectl_path
    workdir = tmp_path_factory.mktemp("kubectl")
    (workdir / "svc.yaml").write_text(_SERVICE)
    return binary, workdir


def test_same_answers_as_kubectl(kubectl: tuple[str, Path]) -> None:
    binary, workdir = kubectl
    rng = random.Random(20240501)
    texts = [v[0] for v in VALID] + [v[0] for v in INVALID] + [m[0] for m in MATCHES]
    texts += [t for t, _ in LABEL_SELECTORS] + [_soup(rng) for _ in range(100)]
    texts += [_structured(rng) for _ in range(100)]
    texts = list(dict.fromkeys(texts))
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda t: _kubectl_outcome(binary, workdir, t), texts))
    mismatches = [
        (text, got, want) for text, got in zip(texts, answers, strict=True) if got != (want := _expected_outcome(text))
    ]
    assert mismatches == []
