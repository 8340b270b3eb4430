"""The command line: ``python -m adapter <command>`` (also installed as ``llm-hpa-adapter``).

Commands: serve, demo, backtest, simulate, calibrate, certs, explain. Each command module exposes
``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from adapter.errors import ConfigError

# Command modules, imported lazily so `serve` does not pay for statsmodels or matplotlib.
_COMMANDS = ("adapter.cli.serve", "adapter.cli.demo", "adapter.cli.backtest", "adapter.cli.certs",
             "adapter.cli.explain", "adapter.cli.simulate", "adapter.cli.calibrate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-hpa-adapter", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a command not built yet in this checkout
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
