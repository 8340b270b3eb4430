"""The kube-state-metrics pod snapshot's label index selects exactly what matching every pod selects."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapter.labels import Requirement, Selector
from adapter.pods.prometheus import PodSnapshot

KEYS = ("app", "tier", "version")
VALUES = ("a", "b", "c")

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
requirement_st = st.one_of(
    st.builds(lambda k, v: Requirement(k, "=", (v,)), st.sampled_from(KEYS), st.sampled_from(VALUES)),
    st.builds(lambda k, v: Requirement(k, "!=", (v,)), st.sampled_from(KEYS), st.sampled_from(VALUES)),
    st.builds(
        lambda k, vs: Requirement(k, "in", tuple(vs)),
        st.sampled_from(KEYS),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=3),
    ),
    st.builds(
        lambda k, vs: Requirement(k, "notin", tuple(vs)),
        st.sampled_from(KEYS),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=3),
    ),
    st.builds(lambda k: Requirement(k, "exists"), st.sampled_from(KEYS)),
    st.builds(lambda k: Requirement(k, "!"), st.sampled_from(KEYS)),
)


@given(st.lists(labels_st, max_size=30), st.lists(requirement_st, max_size=3), st.booleans())
def test_index_selects_what_a_full_scan_selects(
    pod_labels: list[dict[str, str]], reqs: list[Requirement], duplicate: bool
) -> None:
    pods = [(f"pod-{i}", labels) for i, labels in enumerate(pod_labels)]
    if duplicate and pods:  # the same pod twice (two kube-state-metrics replicas): listed once
        pods.append(pods[0])
    selector = Selector(tuple(reqs))
    want = sorted({pod for pod, labels in pods if selector.matches(labels)})
    assert PodSnapshot.of(pods).matching(selector) == want
