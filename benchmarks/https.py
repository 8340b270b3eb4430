"""HTTPS with front-proxy authentication and cached SubjectAccessReviews, next to plain HTTP, same run.

Both adapters serve the same Prometheus data as separate processes; one client (httpx, keep-alive, a
front-proxy client certificate and X-Remote-User headers for HTTPS) sends the same requests to each,
alternating. The SubjectAccessReview endpoint is the small fake from tests/support/fake_kube.py (no
kube-apiserver can run here); with the 10 s decision cache it is asked once per distinct request.

    .venv/bin/python benchmarks/https.py [--requests 1000] [--pods 100]
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.certs import write_bundle  # noqa: E402
from adapter.demo.adapter_process import serve_command  # noqa: E402
from adapter.demo.servers import free_port  # noqa: E402
from tests.support.backends import start_backend  # noqa: E402
from tests.support.fake_kube import FakeKube  # noqa: E402
from tests.support.fleet_data import PodSpec, build  # noqa: E402


def serve(prom: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        serve_command(prom, port, *extra),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return proc, port


def wait(client: httpx.Client, url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if client.get(url + "/livez").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=100)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    write_bundle(work, "llm-hpa-adapter", "custom-metrics", front_proxy=True)
    backend = start_backend("prometheus")
    kube = FakeKube()
    reviews = []

    def sar(req, out) -> None:
        reviews.append(1)
        out.send_json(201, {**json.loads(req.body), "status": {"allowed": True}})

    kube.add_route("POST", r"/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
    kube.start()
    kubeconfig = kube.write_kubeconfig(work / "kubeconfig")
    pods = [PodSpec(f"web-6f7d8c9b5-{i:05d}", gpus=8, layout="honor", labels={"app": "web"}) for i in range(args.pods)]
    backend.load(build("bench", pods, time.time(), idle_gpus=0))
    plain, pport = serve(backend.url, ["--insecure-plain-http"])
    secure, sport = serve(
        backend.url,
        [
            "--tls-cert-file",
            str(work / "tls.crt"),
            "--tls-private-key-file",
            str(work / "tls.key"),
            "--requestheader-client-ca-file",
            str(work / "front-proxy-ca.crt"),
            "--requestheader-allowed-names",
            "front-proxy-client",
            "--authentication-kubeconfig",
            str(kubeconfig),
            "--authentication-skip-lookup",
        ],
    )
    ctx = ssl.create_default_context(cafile=str(work / "ca.crt"))
    ctx.load_cert_chain(str(work / "front-proxy-client.crt"), str(work / "front-proxy-client.key"))
    path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/bench/pods/%2A/llm_composite_load?labelSelector=app%3Dweb"
    headers = {
        "X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
        "X-Remote-Group": "system:serviceaccounts",
    }
    times: dict[str, list[float]] = {"plain HTTP": [], "HTTPS + front-proxy + SAR (cached)": []}
    try:
        with httpx.Client(timeout=30) as pc, httpx.Client(timeout=30, verify=ctx) as sc:
            purl, surl = f"http://127.0.0.1:{pport}", f"https://localhost:{sport}"
            wait(pc, purl)
            wait(sc, surl)
            for i in range(args.requests + 50):
                t0 = time.perf_counter()
                rp = pc.get(purl + path)
                t1 = time.perf_counter()
                rs = sc.get(surl + path, headers=headers)
                t2 = time.perf_counter()
                assert rp.status_code == 200 and rs.status_code == 200, (rp.text, rs.text)
                if i >= 50:
                    times["plain HTTP"].append((t1 - t0) * 1000)
                    times["HTTPS + front-proxy + SAR (cached)"].append((t2 - t1) * 1000)
    finally:
        for p in (plain, secure):
            p.terminate()
            p.wait(10)
        kube.close()
        backend.close()
    print(
        f"\n`python benchmarks/https.py {' '.join(sys.argv[1:])}` ({args.pods} pods × 8 GPUs, llm_composite_load, "
        f"one keep-alive connection each, sequential, alternating; answer cache 5 s as shipped)\n"
    )
    print("| mode | requests/s (one connection) | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for mode, t in times.items():
        ordered = sorted(t)
        print(
            f"| {mode} | {1000 / statistics.mean(t):.0f} | {statistics.median(t):.2f} | "
            f"{ordered[int(0.99 * (len(ordered) - 1))]:.2f} |"
        )
    print(f"\nSubjectAccessReviews sent: {len(reviews)} for {args.requests + 50} HTTPS requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
