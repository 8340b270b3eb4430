"""The command line: ``python -m adapter <command>`` (also installed as ``llm-hpa-adapter``).

Commands: serve, demo, backtest, simulate, calibrate, certs, explain, promadapter-check. Each command module exposes
``register(subparsers)``. Every command module is imported on every run: one that fails to import is a broken
install or a bug, and fails the whole command line with its error instead of vanishing from ``--help``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from adapter import log_redaction
from adapter.errors import ConfigError

# Command modules. Each imports its heavy dependencies (statsmodels, matplotlib) inside the functions that
# need them, so `serve` does not pay for them.
_COMMANDS = (
    "adapter.cli.serve",
    "adapter.cli.demo",
    "adapter.cli.backtest",
    "adapter.cli.certs",
    "adapter.cli.explain",
    "adapter.cli.simulate",
    "adapter.cli.calibrate",
    "adapter.cli.promadapter_check",
)
# Optional dependencies and the extra that installs each (pyproject.toml [project.optional-dependencies]).
_EXTRAS = {"matplotlib": "plot"}


_LOG_LEVELS = ["debug", "info", "warning", "error"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-hpa-adapter", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default="info", choices=_LOG_LEVELS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMANDS:
        importlib.import_module(name).register(sub)
    # Also after the command (``serve --log-level debug``): a Deployment's args list, and the Helm chart's
    # ``extraArguments``, come after ``serve``. SUPPRESS keeps a value given before the command when none follows.
    for command in sub.choices.values():
        command.add_argument(
            "--log-level", default=argparse.SUPPRESS, choices=_LOG_LEVELS, help="as before the command"
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log_redaction.install(args.log_level.upper())  # before anything can log a URL or a credential
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        print(f"error: this option needs {exc.name}: pip install 'llm-hpa-adapter[{extra}]'", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
