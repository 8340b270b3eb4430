"""What the token-level engine costs a replay: one policy over the shared 14-day trace, queue vs token engine.

Runs ``simulate --policy POLICY --workers 1`` twice on this checkout (``--engine queue``, the baseline, then
``--engine token``) and prints each run's own ``runtime_s`` (the policy's CPU-bound loop, without process
start-up) and the ratio token / queue measured in the same run. ``--days`` shortens the replay.

    python benchmarks/sim_engine.py [--policy gpu] [--days 14] [--profile llama3-8b-h100]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from simrun import simulate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", default="gpu")
    p.add_argument("--days", type=float, default=14.0)
    p.add_argument("--profile", default="llama3-8b-h100")
    args = p.parse_args()
    common = ["--workers", "1", "--start", "0", "--duration", f"{args.days * 24:g}h"]
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for engine, extra in (
            ("queue", ["--engine", "queue"]),
            ("token", ["--engine", "token", "--profile", args.profile]),
        ):
            doc = simulate([*common, *extra], Path(tmp) / f"{engine}.json", policies=[args.policy])
            run = doc["policies"][0]
            seconds[engine] = float((run.get("summary") or run)["runtime_s"])
            print(f"{engine:>5}: {seconds[engine]:6.1f} s for {args.days:g} simulated days of {args.policy!r}")
    print(f"token / queue: {seconds['token'] / seconds['queue']:.2f}x")


if __name__ == "__main__":
    main()
