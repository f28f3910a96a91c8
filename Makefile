# The two commands a new user runs: `make demo` and `make test`.
# Both create .venv with the Python found as $(PYTHON) (3.11 or newer).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest docs bench fuzz clean eval-model eval-probe

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "veridic needs Python 3.11 or newer: run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e . --group dev
	touch $(STAMP)

# `make demo` installs only what the demo needs (veridic, and jsonschema for the external
# tools it shows): about 20 s on a fresh machine, where the whole toolchain takes minutes.
# `make test` adds the rest to the same venv.
DEMO_STAMP := $(VENV)/.demo-installed
$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "veridic needs Python 3.11 or newer: run make PYTHON=python3.11 ...")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[external]'
	touch $@

demo: $(DEMO_STAMP)
	$(BIN)/python examples/demo.py

test: lint typecheck pytest docs

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# One worker per core, each test file on one worker (--dist loadfile), so a module's costly
# setup (a wheel built, mypy run over the typecheck cases) runs once, not once per worker.
pytest: $(STAMP)
	$(BIN)/pytest -n auto --dist loadfile

# The docs site (docs/, Sphinx with myst-parser) into build/docs/html, strict: every warning
# fails it, and every cross-reference must resolve (-n). -E reads every page again, since
# Sphinx does not notice a changed docstring. The pages' examples run in pytest
# (tests/test_docs_site.py).
docs: $(STAMP)
	$(BIN)/sphinx-build -E -j auto -W --keep-going -n -q -b html -d build/docs/doctrees docs build/docs/html

# The benchmarks measure veridic against its peers too (the `bench` extra: langchain-core,
# mirascope, pydantic-ai-slim, banks), installed into a venv of their own so that the
# development venv stays as `make test` knows it. One table; BENCH_ARGS="--quick" checks
# that every script runs, "--only request,sizes" chooses, "--profile" profiles a request.
BENCH_VENV := $(VENV)/bench
BENCH_ARGS ?=
$(BENCH_VENV)/.installed: pyproject.toml $(STAMP)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench]' --group dev
	touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/run.py $(BENCH_ARGS)

# Long fuzzing run: hypothesis at a high example count (not part of make test).
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest tests/test_fuzz.py

# Does a real model obey orders injected into data blocks? Measured per data mode, with the
# token cost of each (not part of make test; about an hour on 2 cores the first time, installs
# included: some 25 minutes per full mode).
# The first run builds llama-cpp-python and assembles the pinned model in
# $VERIDIC_EVAL_CACHE (default ~/.cache/veridic-eval); later runs reuse both.
# Other models: make eval-model EVAL_ARGS="--gguf PATH" (or "--endpoint URL --model NAME").
EVAL_ARGS ?=
eval-model: $(STAMP)
	nice -n 15 $(BIN)/python -m veridic.evaluation $(EVAL_ARGS)

# Which sibling tools does a real model confuse? `veridic probe` on a fixture registry of
# real siblings (tests/cli_fixtures/probe_app.py: hotels vs hotel names, delete vs archive
# draft, a tool hidden by roles and one by --hide) with requests written as users ask
# (probe_requests.toml), asked of the pinned model of eval-model, installed and cached the
# same way (the installer prints the model's path last); answers are cached in
# $VERIDIC_EVAL_CACHE/probe. Not part of make test. Exit 1
# (confused pairs found) is a result, not a failure. PROBE_ARGS="--per-tool 1" for a smoke
# run, "--format json" for the record.
PROBE_ARGS ?=
eval-probe: $(STAMP)
	nice -n 15 $(BIN)/python -m veridic.evaluation --install-only > $(VENV)/.eval-model-path
	model="$$(tail -n 1 $(VENV)/.eval-model-path)"; \
	cd tests/cli_fixtures && nice -n 15 $(abspath $(BIN))/python -m veridic probe probe_app:registry \
		--gguf "$$model" --requests probe_requests.toml --hide delete_draft $(PROBE_ARGS); \
	status=$$?; test $$status -le 1

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
