# The two commands of the README's Quick start.  Both create and use a
# project-local virtual environment (.venv), so they work where the system
# Python refuses pip (PEP 668, as Debian's does).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint docs gallery browser venv

## demo: install localsched (with numpy for the demo, dask for getting started's examples)
## and run the main job: writes report.html
demo: venv
	$(PY) -m pip install -q -e ".[demo]"
	$(VENV)/bin/localsched demo -o report.html

## test: install localsched with its test extras and a headless browser, run the tests
test: venv browser
	$(PY) -m pip install -q -e ".[test]"
	$(PY) -m pytest

## lint: the quality gates CI runs after the tests: ruff (rules E, W, F, I, UP, B) and
## mypy, on the files and modules pyproject.toml lists ([tool.ruff], [tool.mypy])
lint: venv
	$(PY) -m pip install -q -e ".[lint]"
	$(VENV)/bin/ruff check
	$(VENV)/bin/mypy

## docs: build the documentation site into docs/_build/html (Sphinx, warnings are errors)
docs: venv
	$(PY) -m pip install -q -e ".[docs]"
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "the site: docs/_build/html/index.html"

## gallery: refresh the screenshots the README and the docs show (docs/_static/gallery;
## `make test` writes its own to temporary directories and leaves the tree clean)
gallery: venv browser
	$(PY) -m pip install -q -e ".[test]"
	LOCALSCHED_WRITE_GALLERY=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_gallery.py tests/diagnostics/reporting/test_gallery_pages.py
	$(PY) docs/_static/gallery/make_findings.py

## venv: the project-local virtual environment (Debian's python3 needs python3-venv for it)
venv: $(PY)

$(PY):
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  rm -rf $(VENV); \
	  if command -v apt-get >/dev/null 2>&1; then \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	    echo "python3 -m venv failed: installing Debian's python3-venv"; \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-venv >/dev/null; \
	  fi; \
	  $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip

## browser: Debian's headless Chromium for the tests that open reports in a browser.
## Without apt-get those tests skip with a reason (in CI, where CI=true, they fail instead).
## $CHROMIUM names another Chromium-based browser to use instead (CI's runners: google-chrome).
browser:
	@[ -n "$$CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "no apt-get here: Chromium not installed, the browser tests will skip"; exit 0; \
	  fi; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null || \
	  { echo "could not install Chromium: the browser tests will skip"; exit 0; }; }
