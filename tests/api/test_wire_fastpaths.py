"""The request-path fast paths give exactly what the general code gives."""

from __future__ import annotations

import dataclasses
import urllib.parse
from decimal import ROUND_HALF_UP, Decimal

from hypothesis import given
from hypothesis import strategies as st

from adapter.api.wire import MetricValueList, go_json, metric_value_list, quantity
from adapter.labels import EVERYTHING, Selector, parse_selector
from adapter.provider.base import MetricSample, ObjectRef, PodSamples, pod_ref
from adapter.quantity import format_quantity
from adapter.query.client import form_encode


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e20, max_value=1e20))
def test_quantity_fast_path_equals_format_quantity(x: float) -> None:
    want = format_quantity(Decimal(repr(x)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))
    assert quantity(x) == want


def test_quantity_examples() -> None:
    assert [quantity(v) for v in (0.0, 1.0, 0.5, 1000.0, 38.8, 1.2345, 0.0004, -2.5, 2e18, 1e21)] == [
        "0",
        "1",
        "500m",
        "1k",
        "38800m",
        "1235m",
        "0",
        "-2500m",
        "2E",
        "1000E",
    ]


@given(st.dictionaries(st.text(), st.text(), max_size=4))
def test_form_encode_equals_urlencode(form: dict[str, str]) -> None:
    assert form_encode(form) == urllib.parse.urlencode(form).encode("ascii")


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12) | st.sampled_from(
    ["llama-0", "a<b>&c", "line\u2028sep\u2029", 'q"uote\\', "ünï"]
)
_selectors = st.sampled_from(
    [EVERYTHING, parse_selector("app=llama"), parse_selector("a in (x,y),!b,c!=d"), parse_selector("tier=web")]
)
_samples = st.builds(
    MetricSample,
    obj=st.builds(
        ObjectRef,
        st.sampled_from(["Pod", "Deployment", "Namespace"]),
        st.sampled_from(["/v1", "apps/v1"]),
        _names,
        st.none() | _names,
    ),
    metric=st.sampled_from(["gpu_utilization_p90", "llm_composite_load_boosted", "m<&>"]),
    ts=st.floats(min_value=0, max_value=4e9),
    value=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
    window_s=st.none() | st.integers(min_value=0, max_value=10**6),
    selector=_selectors,
)


@given(st.sampled_from(["v1beta1", "v1beta2"]), st.lists(_samples, max_size=6), st.booleans())
def test_metric_value_list_encoder_writes_the_bytes_of_the_dict_path(
    version: str, samples: list[MetricSample], preformatted: bool
) -> None:
    if preformatted:  # what the provider hands over from the store: the value's Quantity already formatted
        samples = [dataclasses.replace(s, quantity=quantity(s.value)) for s in samples]
    doc = MetricValueList(version, samples)
    assert doc.encode() == go_json(metric_value_list(version, samples))
    assert go_json(doc) == doc.encode()
    assert go_json(doc, pretty=True) == go_json(metric_value_list(version, samples), pretty=True)


@given(
    st.sampled_from(["v1beta1", "v1beta2"]),
    _names,
    st.sampled_from(["gpu_utilization_p90", "m<&>"]),
    st.none() | st.integers(min_value=0, max_value=10**6),
    _selectors,
    st.lists(
        st.tuples(
            _names,
            st.floats(min_value=0, max_value=4e9),
            st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
        ),
        max_size=6,
        unique_by=lambda t: t[0],
    ),
    st.booleans(),
)
def test_column_wise_pod_lists_encode_like_their_samples(
    version: str,
    namespace: str,
    metric: str,
    window: int | None,
    selector: Selector,
    rows: list[tuple[str, float, float]],
    preformatted: bool,
) -> None:
    pods = [pod for pod, _, _ in rows]
    values = [v for _, _, v in rows]
    text = {pod: quantity(v) for pod, _, v in rows} if preformatted else None
    columns = PodSamples(namespace, metric, window, selector, pods, [ts for _, ts, _ in rows], values, text)
    samples = [MetricSample(pod_ref(pod, namespace), metric, ts, v, window, selector) for pod, ts, v in rows]
    assert list(columns) == [
        dataclasses.replace(s, quantity=None if text is None else text[s.obj.name]) for s in samples
    ]
    assert MetricValueList(version, columns).encode() == go_json(metric_value_list(version, samples))
