# aoq: every target does its own set-up on a fresh machine (venv + pinned deps).
PY      ?= python3
VENV    ?= .venv
VPY     := $(VENV)/bin/python
BACKEND ?= auto
QUICK   ?=
STAMP   := $(VENV)/.installed

.PHONY: venv test lint typecheck unit conform clean

venv: $(STAMP)

$(STAMP): requirements-dev.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements-dev.txt
	$(VPY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

lint: venv
	$(VENV)/bin/ruff check aoq kernels tests conformance
	$(VENV)/bin/ruff format --check aoq kernels tests conformance

typecheck: venv
	$(VENV)/bin/mypy aoq

unit: venv
	$(VPY) -m pytest tests -q

conform: venv
	$(VPY) -m conformance --backend $(BACKEND) $(if $(QUICK),--quick,)

test: lint typecheck unit
	$(MAKE) conform QUICK=1 BACKEND=cpu

clean:
	rm -rf $(VENV) build *.egg-info
