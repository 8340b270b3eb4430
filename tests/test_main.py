"""The command line's entry point (adapter/__main__.py) and what the serving install leaves out.

No command may vanish from the command line because its module fails to import; an option that needs an
optional dependency says which extra installs it; serving never imports the plotting library.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from adapter import __main__ as cli

REPO = Path(__file__).resolve().parents[1]
HPA_FILE = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_every_command_is_registered() -> None:
    assert _commands(cli.build_parser()) == {
        "serve",
        "demo",
        "backtest",
        "certs",
        "explain",
        "simulate",
        "calibrate",
        "promadapter-check",
    }


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["serve"], "info"),
        (["--log-level", "warning", "serve"], "warning"),
        # A Deployment's args (and the chart's extraArguments) come after the command.
        (["serve", "--log-level", "debug"], "debug"),
        (["--log-level", "error", "serve", "--log-level", "debug"], "debug"),
    ],
)
def test_the_log_level_is_read_before_or_after_the_command(argv: list[str], level: str) -> None:
    args = cli.build_parser().parse_args([*argv, "--prometheus-url", "http://127.0.0.1:9"])
    assert args.log_level == level


def test_every_command_takes_the_log_level_after_its_name() -> None:
    (sub,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        (option,) = [a for a in command._actions if "--log-level" in a.option_strings]
        assert option.choices == ["debug", "info", "warning", "error"], name


def test_a_command_that_fails_to_import_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    # It used to be skipped silently when the module itself was missing.
    monkeypatch.setattr(cli, "_COMMANDS", (*cli._COMMANDS, "adapter.cli.no_such_command"))
    with pytest.raises(ModuleNotFoundError, match="adapter.cli.no_such_command"):
        cli.build_parser()


def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "load.csv"
    csv.write_text("ts,rps\n" + "".join(f"{1_700_000_000 + 600 * i},{50 + 10 * i}\n" for i in range(6)))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what `import matplotlib` meets when it is absent
    rc = cli.main(
        [
            "simulate",
            "--trace",
            str(csv),
            "--time-col",
            "ts",
            "--value-col",
            "rps",
            "--hpa",
            str(HPA_FILE),
            "--policy",
            "gpu",
            "--peak-pods",
            "4",
            "--duration",
            "1h",
            "--json",
            str(tmp_path / "sim.json"),
            "--plot",
            str(tmp_path / "sim.png"),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "error: this option needs matplotlib: pip install 'llm-hpa-adapter[plot]'"
    assert not any("Traceback" in line for line in err)
    assert json.loads((tmp_path / "sim.json").read_text())["policies"]  # the run itself completed
    assert not (tmp_path / "sim.png").exists()


def test_matplotlib_is_the_plot_extra_not_a_serving_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("matplotlib") for d in project["dependencies"])
    assert any(d.startswith("matplotlib") for d in project["optional-dependencies"]["plot"])
    # The tests exercise --plot, so installing the test extra brings the plot extra along.
    assert "llm-hpa-adapter[plot]" in project["optional-dependencies"]["test"]


def test_serving_never_imports_matplotlib() -> None:
    code = (
        "import sys\n"
        "from adapter.__main__ import build_parser\n"
        "from adapter.app import create_app\n"
        "from adapter.server import make_server\n"
        "from adapter.settings import Settings\n"
        "build_parser().parse_args(['serve', '--prometheus-url', 'http://127.0.0.1:9'])\n"
        "create_app(Settings(prometheus_url='http://127.0.0.1:9'))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'statsmodels')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert out.stdout == "[]\n"
