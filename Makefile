# Two commands do all set-up: `make report` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MODELS ?= default,gemma-3-270m
CHAPTERS ?= all
PAPERS ?= all
export TOKENIZERS_PARALLELISM = false

.PHONY: report test book pdf reproduce bench clean

# uv installs what pip would, from pip's configured sources (.ci/install says how); INSTALLER=pip uses pip.
$(STAMP): requirements.txt requirements-models.txt pyproject.toml .ci/install
	$(PYTHON) -m venv $(VENV)
	$(PY) .ci/install $(PY)
	touch $(STAMP)

# The book is built even when a (model, chapter) pair failed; the exit status reports the failure.
report: $(STAMP)
	$(PY) -m fairnb run --models $(MODELS) --chapters $(CHAPTERS) --out book/runs; \
	status=$$?; $(PY) -m fairnb book --runs book/runs && exit $$status

book: $(STAMP)
	$(PY) -m fairnb book --runs book/runs

# The whole book as one PDF (after `make report`), printed offline by headless Chromium.
pdf: $(STAMP)
	$(PY) -m fairnb.report.pdf

test: $(STAMP)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check fairnb tests benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest

# The papers' open models under preset=paper; without the hub it prints the plan and exits 0.
reproduce: $(STAMP)
	$(PY) -m fairnb reproduce --paper $(PAPERS) --out book/runs

bench: $(STAMP)
	$(PY) -m benchmarks.run

clean:
	rm -rf _build book/runs results
