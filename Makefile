# Two commands matter: `make run` (the demo on http://127.0.0.1:8000) and `make test`.
SHELL := /bin/sh
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Where `make run` serves: `make run HOST=127.0.0.1:8001`. Only a value given to make counts: a
# HOST in the environment is often the machine's name (tcsh sets it) or a bare address, and
# runserver takes neither.
ifneq ($(origin HOST),command line)
HOST := 127.0.0.1:8000
endif

.PHONY: run test install demo lint typecheck check browser clean worker

$(PY):
	"$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py load_demo

run: demo
	DEBUG=1 $(PY) manage.py runserver $(HOST)

browser:
	scripts/ensure-chromium

test: install browser
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy .

check: lint typecheck test

worker: install
	$(VENV)/bin/celery -A assay worker --loglevel=INFO

clean:
	rm -rf $(VENV) db.sqlite3 .test-db.sqlite3* staticfiles .pytest_cache .mypy_cache .ruff_cache
