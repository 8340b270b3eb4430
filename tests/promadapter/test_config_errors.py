"""A file with an error: the error names the rule (its list, index and seriesQuery) and the field, for each field.

prometheus-adapter reads the file with yaml.v2 ``UnmarshalStrict`` (unknown or repeated keys refused) and
refuses at start-up what ``naming.NamersFromConfig`` cannot build (``pkg/config/loader.go``,
``pkg/naming/metric_namer.go``); the template checks go further than Go's parser (an unknown field is a
start-up error here, a runtime one upstream).
"""

from __future__ import annotations

import pytest

from adapter.errors import ConfigError
from adapter.promadapter.config import parse_config

Q = '{namespace!=""}'
WHERE = r"rules\[0\] \(seriesQuery '\{namespace!=\"\"\}'\)"
SF = f"{WHERE}: seriesFilters\\[0\\]"


def rule(**fields: str) -> str:
    body = {"seriesQuery": f"'{Q}'", "resources": "{template: '<<.Resource>>'}", "metricsQuery": "'sum(<<.Series>>)'"}
    body.update(fields)
    lines = [f"  {k}: {v}" for k, v in body.items() if v != "DROP"]
    lines[0] = "- " + lines[0][2:]
    return "rules:\n" + "\n".join(lines) + "\n"


CASES = [
    # (what, fields, field named in the error, message part)
    ("seriesQuery missing", {"seriesQuery": "DROP"}, r"rules\[0\]: seriesQuery", "missing"),
    ("seriesQuery not a string", {"seriesQuery": "[a]"}, r"rules\[0\]: seriesQuery", "must be a string"),
    ("seriesFilters not a list", {"seriesFilters": "'x'"}, f"{WHERE}: seriesFilters", "must be a list"),
    ("seriesFilters both", {"seriesFilters": "[{is: a, isNot: b}]"}, f"{SF}", "both"),
    ("seriesFilters neither", {"seriesFilters": "[{}]"}, f"{SF}", "either"),
    ("seriesFilters unknown key", {"seriesFilters": "[{matches: a}]"}, f"{SF}.matches", "unknown"),
    ("seriesFilters bad regex", {"seriesFilters": "[{isNot: '(a'}]"}, f"{SF}.isNot", "regexp"),
    ("seriesFilters Perl-only regex", {"seriesFilters": "[{is: 'a(?=b)'}]"}, f"{SF}.is", "Perl"),
    ("resources unknown key", {"resources": "{overide: {}}"}, f"{WHERE}: resources.overide", "unknown field"),
    ("resources not a mapping", {"resources": "'pod'"}, f"{WHERE}: resources", "must be a mapping"),
    ("override label not a label", {"resources": "{overrides: {'a-b': {resource: pod}}}"},
     f"{WHERE}: resources.overrides.a-b", "not a Prometheus label name"),
    ("override unknown resource", {"resources": "{overrides: {x: {resource: flurbs}}}"},
     f"{WHERE}: resources.overrides.x", "unable to normalize group-resource 'flurbs'"),
    ("override unknown resource in a built-in group", {"resources": "{overrides: {x: {group: apps, resource: pods}}}"},
     f"{WHERE}: resources.overrides.x", "'pods.apps'"),
    ("override without resource", {"resources": "{overrides: {x: {group: apps}}}"},
     f"{WHERE}: resources.overrides.x.resource", "missing"),
    ("override unknown key", {"resources": "{overrides: {x: {resource: pod, kind: Pod}}}"},
     f"{WHERE}: resources.overrides.x.kind", "unknown field"),
    ("template without .Resource", {"resources": "{template: 'kube_<<.Group>>'}"},
     f"{WHERE}: resources.template", "must include at least"),
    ("template unknown field", {"resources": "{template: '<<.Kind>>'}"}, f"{WHERE}: resources.template", "field Kind"),
    ("template failing when executed", {"resources": "{template: '<<.Resource>><<index .Group 9>>'}"},
     f"{WHERE}: resources.template", "index out of range"),
    ("namespaced not a bool", {"resources": "{template: '<<.Resource>>', namespaced: 'no way'}"},
     f"{WHERE}: resources.namespaced", "true or false"),
    ("name unknown key", {"name": "{match: x}"}, f"{WHERE}: name.match", "unknown field"),
    ("name.matches bad regex", {"name": "{matches: '[a'}"}, f"{WHERE}: name.matches", "regexp"),
    ("name.as missing with two groups", {"name": "{matches: '^(a)_(b)$'}"}, f"{WHERE}: name.as",
     "has 2 capture groups"),
    ("metricsQuery missing", {"metricsQuery": "DROP"}, f"{WHERE}: metricsQuery", "missing"),
    ("metricsQuery unknown function", {"metricsQuery": "'<<join \",\" .GroupBySlice>>'"}, f"{WHERE}: metricsQuery",
     'function "join" not defined'),
    ("metricsQuery unknown field", {"metricsQuery": "'<<.Labels>>'"}, f"{WHERE}: metricsQuery", "field Labels"),
    ("metricsQuery field on a string", {"metricsQuery": "'<<.Series.Name>>'"}, f"{WHERE}: metricsQuery",
     "field Name in type string"),
    ("metricsQuery unclosed action", {"metricsQuery": "'sum(<<.Series)'"}, f"{WHERE}: metricsQuery", "unclosed"),
    ("metricsQuery unclosed range", {"metricsQuery": "'<<range .GroupBySlice>>x'"}, f"{WHERE}: metricsQuery",
     "no end"),
    ("unknown rule key", {"seriesFilter": "[]"}, f"{WHERE}: seriesFilter", "unknown field"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "where", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_error_names_the_rule_and_the_field(fields: dict[str, str], where: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"{where}: .*{message}"):
        parse_config(rule(**fields))


def test_the_valid_base_rule_loads() -> None:
    """The rule every case above breaks one field of."""
    assert len(parse_config(rule()).rules) == 1


def test_every_error_of_a_file_is_reported_at_once() -> None:
    text = rule(metricsQuery="'<<.Nope>>'") + "- seriesQuery: 'up'\n  metricsQuery: 'x'\n  name: {matches: '('}\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    message = str(info.value)
    assert message.startswith("prometheus-adapter config: 2 errors:")
    assert "rules[0] (seriesQuery '{namespace!=\"\"}'): metricsQuery:" in message
    assert "rules[1] (seriesQuery 'up'): name.matches:" in message


def test_external_rules_are_named_as_such() -> None:
    with pytest.raises(ConfigError, match=r"externalRules\[1\] \(seriesQuery 'b'\): metricsQuery: missing"):
        parse_config("externalRules:\n- {seriesQuery: a, metricsQuery: x}\n- {seriesQuery: b}\n")


def test_unknown_top_level_key() -> None:
    with pytest.raises(ConfigError, match="prometheus-adapter config: externalrules: unknown field"):
        parse_config("externalrules: []\n")


def test_a_repeated_key_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"rules\[0\] \(seriesQuery 'a'\): metricsQuery: given twice \(lines 3 and 4\)"
    ):
        parse_config("rules:\n- seriesQuery: a\n  metricsQuery: x\n  metricsQuery: y\n")


def test_a_repeated_key_with_an_empty_first_value_names_the_rule_and_field() -> None:
    """A block commented out under its key leaves the key empty; yaml.v2 UnmarshalStrict still refuses the second
    one ("line 8: field resources already set in type config.DiscoveryRule"): the error names rule and field."""
    text = (
        "rules:\n"
        "- seriesQuery: '{a!=\"\"}'\n"
        "  metricsQuery: x\n"
        "- seriesQuery: '{namespace!=\"\"}'\n"
        "  resources:\n"
        "    # overrides:\n"
        "    #   pod: {resource: pod}\n"
        "  resources:\n"
        "    template: <<.Resource>>\n"
        "  metricsQuery: x\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert str(info.value) == (
        "prometheus-adapter config: 1 error:\n"
        f"  rules[1] (seriesQuery {Q!r}): resources: given twice (lines 5 and 8);"
        " prometheus-adapter (yaml.v2 UnmarshalStrict) refuses a repeated key"
    )


def test_repeated_keys_are_named_by_path_and_reported_with_the_other_errors() -> None:
    text = (
        "externalRules:\n"
        "- seriesQuery: q\n"
        "  resources:\n"
        "    overrides:\n"
        "      pod: {resource: pod}\n"
        "      pod: {resource: pods}\n"
        "  metricsQuery: x\n"
        "- seriesQuery: r\n"
        "rules: []\n"
        "rules: []\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    lines = str(info.value).splitlines()
    assert lines[0] == "prometheus-adapter config: 3 errors:"
    assert lines[1].startswith(
        "  externalRules[0] (seriesQuery 'q'): resources.overrides.pod: given twice (lines 5 and 6)"
    )
    assert lines[2].startswith("  prometheus-adapter config: rules: given twice (lines 9 and 10)")
    assert lines[3].startswith("  externalRules[1] (seriesQuery 'r'): metricsQuery: missing")


def test_not_yaml() -> None:
    with pytest.raises(ConfigError, match="not YAML"):
        parse_config("rules: [")


def test_rules_not_a_list() -> None:
    with pytest.raises(ConfigError, match="prometheus-adapter config: rules: must be a list"):
        parse_config("rules: {seriesQuery: a}\n")


def test_resource_rules_are_read_and_not_served_with_one_warning() -> None:
    """The Helm chart writes ``resourceRules`` from ``rules.resource``; a file from a working cluster loads."""
    text = rule() + "resourceRules:\n  cpu: {containerQuery: x, nodeQuery: y}\n  window: 3m\n"
    config = parse_config(text)
    assert len(config.rules) == 1
    assert len(config.warnings) == 1 and config.warnings[0].startswith("resourceRules: read and not served")


def test_an_empty_file_serves_nothing() -> None:
    config = parse_config("")
    assert (config.rules, config.external_rules, config.warnings) == ((), (), ())


def test_a_crd_override_is_taken_as_written_with_a_warning() -> None:
    config = parse_config(rule(resources="{overrides: {foo: {group: example.com, resource: Foos}}}"))
    assert str(config.rules[0].resources.overrides["foo"]) == "foos.example.com"
    assert "foos.example.com is not a built-in resource" in config.warnings[0]


def test_namespaced_false_on_a_custom_rule_is_accepted_with_a_warning() -> None:
    """prometheus-adapter reads ``namespaced`` into every namer but only ``BuildExternal`` looks at it."""
    config = parse_config(rule(resources="{template: '<<.Resource>>', namespaced: false}"))
    assert config.warnings == (
        "rules[0] (seriesQuery '{namespace!=\"\"}'): resources.namespaced: false has no effect on a custom-metrics"
        " rule (external only)",
    )


def test_dollar_delimiters_in_the_resource_template_are_refused_with_a_hint() -> None:
    """``${.Resource}$`` (a 2018 pre-release image's delimiters) is plain text to every release since v0.2.1,
    which parse with ``Delims("<<", ">>")``; upstream refuses the template too ("must include at least
    `{{.Resource}}` in the label template", pkg/naming/lbl_res.go)."""
    text = rule(resources="{template: '${.Resource}$'}")
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    message = str(info.value)
    assert f"{WHERE.replace(chr(92), '')}: resources.template: must include at least `<<.Resource>>`" in message
    assert "'${.Resource}$' is plain text to prometheus-adapter" in message


def test_dollar_delimiters_in_the_metrics_query_load_with_a_warning() -> None:
    """Upstream loads such a metricsQuery (text with no action) and sends it as written; it warns here."""
    config = parse_config(rule(metricsQuery="'sum(${.Series}$)'"))
    assert config.rules[0].metrics_query.source == "sum(${.Series}$)"
    [warning] = [w for w in config.warnings if "metricsQuery" in w]
    assert warning.startswith(
        "rules[0] (seriesQuery '{namespace!=\"\"}'): metricsQuery: sent to the backend as written"
    )
    assert "'${.Series}$' is plain text" in warning
    assert not [w for w in parse_config(rule()).warnings if "metricsQuery" in w]
