# The two commands of the README's Quick start.
PYTHON ?= python3

.PHONY: demo test browser

## demo: install localsched and run the main job (writes report.html)
demo:
	$(PYTHON) -m pip install -e .
	localsched demo -o report.html

## test: install localsched with its test extras and a headless browser, run the tests
test: browser
	$(PYTHON) -m pip install -e ".[test]"
	$(PYTHON) -m pytest

## browser: Debian's headless Chromium, for the tests that open reports in a browser
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }
