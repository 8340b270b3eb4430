"""What the simulator benchmarks share: the shared trace, the example HPA, and one ``simulate`` run.

``calibrate_fleets.py``, ``rise_quantile_cv.py`` and ``information_bound.py`` each replay the shared trace
through ``python -m adapter simulate`` in a child process (its ``--workers`` fork their own) and read its JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "adapter" / "data" / "traces" / "servegen_language_m_mid_10min.csv"
HPA = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"


def simulate(args: Sequence[str], out: Path, *, policies: Sequence[str], trace: Path = TRACE) -> dict[str, Any]:
    """``python -m adapter simulate --trace TRACE --hpa <example HPA> ARGS --json OUT --policy P ...`` on this
    checkout; the JSON document it wrote. A failed run ends the benchmark with simulate's own message."""
    cmd = [sys.executable, "-m", "adapter", "simulate", "--trace", str(trace), "--hpa", str(HPA), *args]
    cmd += ["--json", str(out), *(x for p in policies for x in ("--policy", p))]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"simulate failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc
