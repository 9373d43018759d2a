# aoq: every target does its own set-up on a fresh machine (venv + pinned deps).
PY      ?= python3
VENV    ?= .venv
BACKEND ?= auto
QUICK   ?=
# pytest-xdist for the unit and interpreter suites: one worker a core, at most 8 (CI's two
# cores take the interpreter suite from 25 min to 11), a file's tests on one worker (the
# container tests share their engine fixture's images). PYTEST_JOBS= runs serially.
PYTEST_JOBS ?= -n auto --maxprocesses 8 --dist loadfile
# AOQ_PYTHON: an interpreter that already has aoq's dependencies (the container images set it);
# then no venv is made and nothing is installed.
ifdef AOQ_PYTHON
VPY     := $(AOQ_PYTHON)
STAMP   :=
else
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
endif

.PHONY: venv test lint typecheck unit conform bench report clean container-test kernels-interpret hooks

venv: $(STAMP)

$(VENV)/.installed: requirements-dev.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements-dev.txt
	$(VPY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

lint: venv
	$(VENV)/bin/ruff check aoq kernels tests conformance reports ci bench
	$(VENV)/bin/ruff format --check aoq kernels tests conformance reports ci bench
	$(VENV)/bin/hadolint Dockerfile.cuda Dockerfile.rocm
	$(VENV)/bin/actionlint -config-file .github/actionlint.yaml ci/workflows/nightly.yml \
		.github/workflows/nightly.yml

typecheck: venv
	$(VENV)/bin/mypy aoq ci

# Container tests need a Docker engine (ci/engine.sh start); without one they are skipped,
# unless AOQ_REQUIRE_DOCKER=1 (.ci/run sets it), and the image builds wait for container-test.
unit: venv
	$(VPY) -m pytest tests -q -m "not container_full" $(PYTEST_JOBS)

container-test: venv
	ci/engine.sh base
	$(VPY) -m pytest tests/ci -q -m "container or container_full" --durations=5

# BACKEND=auto|cpu|cuda|rocm|interpret, QUICK=1 for the CI subset, ARGS for anything else
# (e.g. ARGS="--only 'int4wo*' --jobs 4"). Exit status is non-zero iff a case is red.
# CONTAINER=1 runs it inside Dockerfile.<vendor>'s image (ci/container.py; BACKEND=cpu|cuda|rocm;
# AOQ_BASE_IMAGE, AOQ_CA_BUNDLE, AOQ_WHEELS, AOQ_TORCH_SPEC, AOQ_CONTAINER_TIMEOUT tune it).
conform: venv
	$(VPY) -m conformance $(if $(CONTAINER),--container,) --backend $(BACKEND) $(if $(QUICK),--quick,) $(ARGS)

# The speed suite (bench/, pytest + pytest-benchmark): every config x dtype x LLM shape against
# bf16 F.linear and torchao, the quantize/cast kernels, the MX training step, aoq's host
# overhead; ceilings measured in the same run. BACKEND=auto|cpu|cuda|rocm, QUICK=1 for tiny
# shapes (CI, laptops; < 1 min on 2 cores), ARGS for anything else (e.g. ARGS="--only 'int4wo*'
# --budget-s 300"). Rows go to reports/results.sqlite and reports/runs/<run_id>.jsonl as each
# test finishes; a table of speedups is printed. CONTAINER=1 runs it inside Dockerfile.<vendor>'s
# image, as for conform.
bench: venv
	$(VPY) -m bench $(if $(CONTAINER),--container,) --backend $(BACKEND) $(if $(QUICK),--quick,) $(ARGS)

# Re-render reports/site/index.html from the store and reports/runs/*.jsonl; CHECK=1 also
# loads it in headless Chromium (no console errors) and saves a screenshot.
report: venv
	$(VPY) -m reports $(if $(CHECK),--check,)

# The Triton kernels on CPU through the interpreter (TRITON_INTERPRET=1 must be set before
# aoq is imported, hence a pytest run of its own) against aoq.formats; the compile-target
# subset (sm90, gfx942) runs inside `unit` (tests/kernels/test_targets.py).
kernels-interpret: venv
	TRITON_INTERPRET=1 $(VPY) -m pytest tests/kernels/test_interpret.py tests/kernels/test_decode_mma.py \
		tests/kernels/test_decode_mma_rows.py tests/kernels/test_decode_mma_mx_rows.py \
		tests/kernels/test_gemv_static.py \
		tests/kernels/test_decode_mma_fp6.py tests/kernels/test_decode_mma_nvfp4.py \
		tests/kernels/test_decode_mma_mx.py tests/kernels/test_act_qdq.py \
		tests/kernels/test_int4_zmma.py tests/kernels/test_w4a8_gemv.py \
		tests/kernels/test_decode_mma_mx8.py tests/kernels/test_decode_mma_xmx.py \
		tests/kernels/test_decode_mma_sk.py tests/kernels/test_decode_mma_tma.py \
		tests/kernels/test_w4a8_mma.py tests/kernels/test_mid_rows.py tests/kernels/test_wt_rows.py \
		tests/kernels/test_wt_rows_w4a8.py tests/kernels/test_wt_rows_mx.py tests/kernels/test_wt_rows_fp6.py tests/bench/test_wt_probe.py tests/bench/test_ws_probe.py \
		tests/bench/test_rows_ab.py tests/tensors/test_triton_linear_rows.py \
		-q $(PYTEST_JOBS)

test: lint typecheck unit kernels-interpret
	$(MAKE) conform QUICK=1 BACKEND=cpu

# The git pre-commit guard of committed runs (ci/hooks/pre-commit): reports/runs must be in the
# tree and no run deleted or edited.
hooks:
	install -m 755 ci/hooks/pre-commit "$$(git rev-parse --git-path hooks)/pre-commit"

clean:
	rm -rf $(VENV) build *.egg-info
