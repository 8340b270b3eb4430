"""Tests of the test infrastructure: the hand-made remote-write encoding, the loaders, the dev servers.

The encoding is checked byte by byte against the published formats, and then end to end: real
Prometheus / VictoriaMetrics servers must accept what we send and answer queries with exactly the values
and timestamps we loaded.
"""

from __future__ import annotations

import json
import math
import random
import socket
import time

import httpx
import numpy as np
import pytest

from adapter.demo import servers
from adapter.demo.servers import (
    BinaryNotFound,
    DevServerError,
    PrometheusProcess,
    VictoriaMetricsProcess,
    free_port,
)
from tests.support.backends import LoadError, Series, TestBackend
from tests.support.procs import kill, pause, resume
from tests.support.remote_write import (
    encode_sample,
    encode_timeseries,
    literal_tag,
    snappy_block_literal,
    varint,
)

STEP = 15  # seconds between samples, like a typical scrape interval

# ---------------------------------------------------------------------------------------------------------
# remote-write encoding (no servers)
# ---------------------------------------------------------------------------------------------------------


def test_varint_matches_protobuf_spec_examples() -> None:
    # https://protobuf.dev/programming-guides/encoding/: 1 -> 01, 150 -> 96 01; int64 -1 takes ten bytes.
    assert varint(1) == b"\x01"
    assert varint(150) == b"\x96\x01"
    assert varint(300) == b"\xac\x02"
    assert varint(-1) == b"\xff" * 9 + b"\x01"


def test_sample_encoding_is_double_then_int64_varint() -> None:
    # field 1 wire type 1 (fixed64) = 0x09; field 2 wire type 0 (varint) = 0x10.
    assert encode_sample(150, 1.0) == b"\x09" + bytes.fromhex("000000000000f03f") + b"\x10\x96\x01"


def test_timeseries_labels_are_sorted_by_name() -> None:
    encoded = encode_timeseries({"pod": "p", "__name__": "m", "namespace": "n"}, [])
    # Each label is field 1 (0x0a), a length, then Label{name=1 (0x0a), value=2 (0x12)}.
    names = [b"__name__", b"namespace", b"pod"]
    positions = [encoded.index(b"\x0a" + bytes([len(n)]) + n) for n in names]
    assert positions == sorted(positions)


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (1, "00"),
        (60, "ec"),  # (60 - 1) << 2
        (61, "f03c"),  # tag 60: one length byte follows
        (256, "f0ff"),
        (257, "f40001"),  # tag 61: two bytes
        (65536, "f4ffff"),
        (65537, "f8000001"),  # tag 62: three bytes
        (2**24 + 1, "fc00000001"),  # tag 63: four bytes
        (2**32, "fcffffffff"),
    ],
)
def test_snappy_literal_tags_follow_format_description(length: int, expected: str) -> None:
    assert literal_tag(length).hex() == expected


@pytest.mark.parametrize("length", [0, 2**32 + 1])
def test_snappy_literal_tag_rejects_impossible_lengths(length: int) -> None:
    with pytest.raises(ValueError):
        literal_tag(length)


def _decode_literal_only_snappy(block: bytes) -> bytes:
    """A minimal snappy block decoder for literal elements (format_description.txt, section 2.1)."""
    size = shift = pos = 0
    while True:
        byte = block[pos]
        pos += 1
        size |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    out = bytearray()
    while pos < len(block):
        tag = block[pos]
        pos += 1
        assert tag & 0b11 == 0, "only literal elements are expected"
        n = tag >> 2
        if n >= 60:
            extra = n - 59
            n = int.from_bytes(block[pos : pos + extra], "little")
            pos += extra
        out += block[pos : pos + n + 1]
        pos += n + 1
    assert len(out) == size
    return bytes(out)


@pytest.mark.parametrize("size", [0, 1, 60, 61, 300, 65536, 65537, 200_000])
def test_snappy_literal_block_round_trips(size: int) -> None:
    data = random.Random(size).randbytes(size)
    assert _decode_literal_only_snappy(snappy_block_literal(data)) == data


# ---------------------------------------------------------------------------------------------------------
# loading and querying the shared servers
# ---------------------------------------------------------------------------------------------------------


def _aligned_now() -> int:
    """A recent multiple of STEP a little in the past, so every sample is safely before 'now'."""
    return (int(time.time()) // STEP) * STEP - STEP


def _value(pod: int, t: int) -> float:
    # Distinct per pod and per timestamp, with a fractional part that must survive exactly.
    return pod * 1_000_000 + (t // STEP) % 100_000 + 0.125


def test_recent_samples_answer_instant_and_range_queries(backend: TestBackend, unique_ns: str) -> None:
    end = _aligned_now()
    times = list(range(end - 3600, end + 1, STEP))
    pods = [f"p{i}" for i in range(3)]
    backend.load(
        Series(
            {"__name__": "llm_test_gauge", "namespace": unique_ns, "pod": pod},
            [(t, _value(i, t)) for t in times],
        )
        for i, pod in enumerate(pods)
    )
    selector = f'llm_test_gauge{{namespace="{unique_ns}"}}'

    # Instant query exactly on a sample, and between two samples (the earlier one answers).
    for at, sample_t in [(times[100], times[100]), (times[100] + 7, times[100]), (end, end)]:
        result = backend.query(selector, at)
        assert sorted(r["metric"]["pod"] for r in result) == pods
        for r in result:
            assert r["metric"] == {
                "__name__": "llm_test_gauge",
                "namespace": unique_ns,
                "pod": r["metric"]["pod"],
            }
            assert r["value"][0] == at
            assert float(r["value"][1]) == _value(pods.index(r["metric"]["pod"]), sample_t)
        stamps = backend.query(f"timestamp({selector})", at)
        assert {float(r["value"][1]) for r in stamps} == {float(sample_t)}

    # Range query: one point per step, each the sample at that timestamp.
    start, stop = times[10], times[30]
    matrix = backend.query_range(selector, start, stop, STEP)
    assert len(matrix) == len(pods)
    for series in matrix:
        i = pods.index(series["metric"]["pod"])
        assert [p[0] for p in series["values"]] == list(range(start, stop + 1, STEP))
        assert [float(p[1]) for p in series["values"]] == [_value(i, t) for t in range(start, stop + 1, STEP)]


def _rel_tolerance(backend: TestBackend) -> float:
    # Prometheus keeps float64 exactly; VictoriaMetrics stores a value as a decimal mantissa and exponent
    # and keeps only ~12 significant digits (measured: 50.01230153357483 comes back as 50.0123015336).
    return 0.0 if backend.kind == "prometheus" else 1e-11


def test_twelve_hours_of_history_loaded_out_of_order(backend: TestBackend, unique_ns: str) -> None:
    end = _aligned_now()
    times = np.arange(end - 12 * 3600 + STEP, end + 1, STEP)  # exactly 12 h worth: 2880 samples
    n_pods = 8  # 8 x 2880 samples spans more than one load batch, so series get cut across requests
    rng = np.random.default_rng(7)
    values = rng.normal(50.0, 10.0, size=(n_pods, times.size))
    labels = [{"__name__": "llm_test_history", "namespace": unique_ns, "pod": f"p{i}"} for i in range(n_pods)]

    # Newest hour first, then the older hours in shuffled order: Prometheus must take them through its
    # out-of-order window, VictoriaMetrics does not care.
    hour = 3600 // STEP
    chunks = [slice(max(0, stop - hour), stop) for stop in range(times.size, 0, -hour)]
    first, rest = chunks[0], chunks[1:]
    random.Random(3).shuffle(rest)
    for chunk in [first, *rest]:
        backend.load(
            Series(labels[i], list(zip(times[chunk].tolist(), values[i, chunk].tolist(), strict=True)))
            for i in range(n_pods)
        )

    selector = f'llm_test_history{{namespace="{unique_ns}"}}'
    # 5 s past the last sample so the 12 h window edge falls between samples (Prometheus closes the left
    # edge, VictoriaMetrics opens it: only an edge sample could tell them apart).
    at = int(times[-1]) + 5
    tol = _rel_tolerance(backend)
    counts = {r["metric"]["pod"]: float(r["value"][1]) for r in backend.query(f"count_over_time({selector}[12h])", at)}
    assert counts == {f"p{i}": float(times.size) for i in range(n_pods)}
    sums = {r["metric"]["pod"]: float(r["value"][1]) for r in backend.query(f"sum_over_time({selector}[12h])", at)}
    for i in range(n_pods):
        assert sums[f"p{i}"] == pytest.approx(values[i].sum(), rel=max(1e-12, tol))

    # Every hour across the history: the value at that exact sample, from a range query and from instant ones.
    idx = np.arange(0, times.size, hour)
    matrix = backend.query_range(selector, int(times[0]), int(times[-1]), 3600)
    assert len(matrix) == n_pods
    for series in matrix:
        i = int(series["metric"]["pod"][1:])
        assert [p[0] for p in series["values"]] == times[idx].tolist()
        assert [float(p[1]) for p in series["values"]] == pytest.approx(values[i, idx].tolist(), rel=tol)
    for j in idx[::3]:
        got = {r["metric"]["pod"]: float(r["value"][1]) for r in backend.query(selector, int(times[j]))}
        assert got == pytest.approx({f"p{i}": values[i, j] for i in range(n_pods)}, rel=tol)

    # quantile over pods matches numpy's linear-interpolation percentile (a fact the adapter relies on).
    j = int(idx[5])
    q = backend.query(f"quantile(0.9, {selector})", int(times[j]))
    assert float(q[0]["value"][1]) == pytest.approx(np.percentile(values[:, j], 90), rel=max(1e-12, tol))


def _nonfinite_series(ns: str, end: int) -> Series:
    return Series(
        {"__name__": "llm_test_nonfinite", "namespace": ns},
        [(end - 3 * STEP, 1.0), (end - 2 * STEP, math.nan), (end - STEP, math.inf), (end, -math.inf)],
    )


def test_infinities_survive(backend: TestBackend, unique_ns: str) -> None:
    end = _aligned_now()
    backend.load([_nonfinite_series(unique_ns, end)])
    selector = f'llm_test_nonfinite{{namespace="{unique_ns}"}}'
    assert [r["value"][1] for r in backend.query(selector, end - STEP)] == ["+Inf"]
    assert [r["value"][1] for r in backend.query(selector, end)] == ["-Inf"]


def test_nan_survives_as_nan_in_prometheus(prometheus: TestBackend, unique_ns: str) -> None:
    end = _aligned_now()
    prometheus.load([_nonfinite_series(unique_ns, end)])
    result = prometheus.query(f'llm_test_nonfinite{{namespace="{unique_ns}"}}', end - 2 * STEP)
    assert [r["value"][1] for r in result] == ["NaN"]


def test_victoriametrics_drops_nan_samples_at_ingest(victoriametrics: TestBackend, unique_ns: str) -> None:
    # A real difference the adapter must live with: VictoriaMetrics 1.79 stores no NaN sample, so the
    # query at the NaN's timestamp falls back to the previous sample within the lookback window.
    end = _aligned_now()
    victoriametrics.load([_nonfinite_series(unique_ns, end)])
    selector = f'llm_test_nonfinite{{namespace="{unique_ns}"}}'
    assert [r["value"][1] for r in victoriametrics.query(selector, end - 2 * STEP)] == ["1"]
    assert [r["value"][1] for r in victoriametrics.query(f"count_over_time({selector}[1h])", end)] == ["3"]


def test_prometheus_load_rejects_samples_beyond_the_out_of_order_window(
    prometheus: TestBackend, unique_ns: str
) -> None:
    now = _aligned_now()
    prometheus.load([Series({"__name__": "llm_test_bounds", "namespace": unique_ns}, [(now, 1.0)])])
    too_old = Series({"__name__": "llm_test_bounds", "namespace": unique_ns}, [(now - 40 * 86400, 1.0)])
    # Prometheus 2.42 answers HTTP 500 "too old sample" here (a remote-write sender would retry forever).
    with pytest.raises(LoadError, match="too old sample"):
        prometheus.load([too_old])


def test_victoriametrics_silently_drops_rows_far_in_the_future(victoriametrics: TestBackend, unique_ns: str) -> None:
    # The raw server fact that the loader guards against: 204, yet nothing stored.
    at_ms = round((time.time() + 3 * 86400) * 1000)
    metric = {"__name__": "llm_test_future", "namespace": unique_ns}
    line = json.dumps({"metric": metric, "values": [1], "timestamps": [at_ms]})
    with httpx.Client(trust_env=False) as client:
        assert client.post(victoriametrics.url + "/api/v1/import", content=line + "\n").status_code == 204
        client.get(victoriametrics.url + "/internal/force_flush").raise_for_status()
        exported = client.get(
            victoriametrics.url + "/api/v1/export", params={"match[]": f'{{namespace="{unique_ns}"}}'}
        )
    assert exported.status_code == 200 and exported.text == ""


def test_victoriametrics_load_refuses_rows_it_would_drop(victoriametrics: TestBackend, unique_ns: str) -> None:
    future = Series({"__name__": "llm_test_future", "namespace": unique_ns}, [(time.time() + 3 * 86400, 1.0)])
    with pytest.raises(LoadError, match="more than 2 days in the future"):
        victoriametrics.load([future])


# ---------------------------------------------------------------------------------------------------------
# dev-server lifecycle (own servers: the shared ones must never be stopped)
# ---------------------------------------------------------------------------------------------------------


def _load_marker(backend: TestBackend, name: str, at: int) -> None:
    backend.load([Series({"__name__": name}, [(at - STEP, 1.0), (at, 2.0)])])


def _marker_values(backend: TestBackend, name: str, at: int) -> list[str]:
    return [r["value"][1] for r in backend.query(name, at)]


def test_stop_then_start_keeps_port_and_data(own_backend: TestBackend) -> None:
    at = _aligned_now()
    _load_marker(own_backend, "llm_test_marker", at)
    process = own_backend.process
    url, data_dir = own_backend.url, process.data_dir

    process.stop()
    assert not process.running()
    assert data_dir.is_dir()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/api/v1/query", params={"query": "1"}, trust_env=False)

    process.start()
    assert own_backend.url == url and process.data_dir == data_dir
    assert _marker_values(own_backend, "llm_test_marker", at) == ["2"]


def test_kill_then_start_serves_again(own_backend: TestBackend) -> None:
    at = _aligned_now()
    _load_marker(own_backend, "llm_test_before_kill", at - 60)
    process = own_backend.process
    url = own_backend.url

    kill(process)
    assert not process.running() and process.pid is None
    process.start()
    assert process.running() and own_backend.url == url
    before = _marker_values(own_backend, "llm_test_before_kill", at - 60)
    if own_backend.kind == "prometheus":
        # Remote write is in the WAL before Prometheus answers, so a crash right after loses nothing.
        assert before == ["2"]
    # VictoriaMetrics may lose rows imported in the ~5 s before a SIGKILL (force_flush makes them
    # searchable, not durable), so whether they survived is not asserted there.
    _load_marker(own_backend, "llm_test_after_kill", at)
    assert _marker_values(own_backend, "llm_test_after_kill", at) == ["2"]


def test_paused_server_does_not_answer_until_resumed(own_backend: TestBackend) -> None:
    process = own_backend.process
    pause(process)
    try:
        assert process.running()
        # A frozen process never answers, whatever the timeout: the read must time out.
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(own_backend.url + "/api/v1/query", params={"query": "1"}, timeout=0.5, trust_env=False)
    finally:
        resume(process)
    assert [r["value"] for r in own_backend.query("vector(1)", 1000)] == [[1000, "1"]]


@pytest.mark.binary("victoria-metrics")
def test_close_removes_the_directory() -> None:
    process = VictoriaMetricsProcess()
    process.start()
    workdir = process.workdir
    assert (workdir / "data").is_dir() and process.log_path.is_file()
    process.close()
    assert not workdir.exists()
    assert not process.running()


@pytest.mark.binary("prometheus")
def test_context_manager_starts_and_closes() -> None:
    with PrometheusProcess(scrape_configs=[]) as prom:
        workdir = prom.workdir
        assert json.loads(prom.config_path.read_text())["storage"]["tsdb"]["out_of_order_time_window"] == "30d"
        assert httpx.get(prom.url + "/-/ready", trust_env=False).status_code == 200
    assert not workdir.exists()


def test_missing_binary_is_a_clear_error() -> None:
    process = PrometheusProcess(binary="no-such-prometheus-binary")
    with pytest.raises(BinaryNotFound, match="install the Debian package 'prometheus'"):
        process.start()


@pytest.mark.binary("prometheus")
def test_failed_start_reports_the_log_tail() -> None:
    process = PrometheusProcess(extra_args=["--no-such-flag"])
    try:
        with pytest.raises(DevServerError, match="no-such-flag"):
            process.start()
        assert not process.running()
    finally:
        process.close()


def test_free_port_is_bindable() -> None:
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # raises if the port is taken
        assert sock.getsockname() == ("127.0.0.1", port)


@pytest.mark.binary("victoria-metrics")
def test_a_paused_server_can_still_be_stopped() -> None:
    process = VictoriaMetricsProcess()
    process.start()
    try:
        pause(process)
        process.stop()  # SIGTERM alone would stay pending on a stopped process
        assert not process.running()
    finally:
        process.close()


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.mark.binary("victoria-metrics")
def test_a_pinned_busy_port_fails_with_the_servers_own_message() -> None:
    with _busy_port() as busy:
        process = VictoriaMetricsProcess(port=busy.getsockname()[1])
        try:
            with pytest.raises(DevServerError, match="address already in use"):
                process.start()
        finally:
            process.close()


@pytest.mark.binary("victoria-metrics")
def test_first_start_moves_to_another_port_when_the_free_one_was_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _busy_port() as busy:
        taken = busy.getsockname()[1]
        # Reproduce the race deterministically: the first "free" port handed out is already bound.
        ports = iter([taken])
        real_free_port = servers.free_port
        monkeypatch.setattr(servers, "free_port", lambda: next(ports, None) or real_free_port())
        process = VictoriaMetricsProcess()
        try:
            process.start()
            assert process.running() and process.port != taken
        finally:
            process.close()
