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

from collections.abc import Mapping
from dataclasses import dataclass, field

from adapter.promadapter.gotemplate.execute import execute
from adapter.promadapter.gotemplate.parse import parse_nodes
from adapter.promadapter.gotemplate.tree import NO_VALUE, Kind, Node, Struct, TemplateError, Value, go_format

__all__ = ["NO_VALUE", "Kind", "Struct", "Template", "TemplateError", "Value", "go_format", "parse_template"]


@dataclass(frozen=True)
class Template:
    """A parsed template: ``render(data)`` executes it on a ``Struct`` whose fields are the declared ones."""

    source: str
    nodes: tuple[Node, ...] = field(repr=False, compare=False)

    def render(self, data: Struct) -> str:
        """The text the template produces; ``TemplateError`` for what only shows at execution (an index out of
        range, a comparison of a string with a number)."""
        return execute(self.nodes, data)


def parse_template(source: str, fields: Mapping[str, Kind]) -> Template:
    """Parse ``source`` for data with ``fields`` (name -> kind); ``TemplateError`` for anything not read."""
    return Template(source, parse_nodes(source, fields))
