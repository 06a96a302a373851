"""The documentation site and the README, as a reader meets them.

* Every public name of ``localsched`` and ``localsched.diagnostics`` (their
  ``__all__``) has an entry in the API reference (``docs/api/*.md``).
* Every ```` ```python ```` block of the docs and of the README runs: the
  blocks of one page run in order, as one script, in a fresh interpreter in
  an empty directory (a page is a session: later blocks use what earlier
  ones defined).  Examples that cannot run here (a SLURM cluster) are
  written as ```` ```{code-block} python ````, which this test leaves out.
* The site builds with Sphinx with warnings as errors, every page opens in
  headless Chromium with no console error and no broken image, and every
  internal link (``href``/``src`` to a file of the site, and its ``#anchor``)
  resolves.
"""

from __future__ import annotations

import html.parser
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.support.browser import open_in_chromium, require_chromium

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

PYTHON_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
API_ENTRY = re.compile(r"^\.\. (?:autoclass|autofunction|autodata|py:data|py:function|py:class)::"
                       r"\s+(\S+)", re.M)


def doc_pages() -> list[Path]:
    """The Markdown pages of the site (not its build, not the helpers' notes)."""
    return sorted(p for p in DOCS.rglob("*.md")
                  if not {"_build", "notes"} & set(p.relative_to(DOCS).parts))


def python_blocks(path: Path) -> list[str]:
    return PYTHON_FENCE.findall(path.read_text(encoding="utf-8"))


def api_entries() -> set[str]:
    names: set[str] = set()
    for page in (DOCS / "api").glob("*.md"):
        names.update(API_ENTRY.findall(page.read_text(encoding="utf-8")))
    return names


# --- the API reference -------------------------------------------------------

def test_api_entries_are_parsed():
    # The parser below must see the directives as the pages write them.
    text = "```{eval-rst}\n.. autoclass:: localsched.diagnostics.Profiler\n   :members:\n```\n"
    assert API_ENTRY.findall(text) == ["localsched.diagnostics.Profiler"]


@pytest.mark.parametrize("package", ["localsched", "localsched.diagnostics"])
def test_every_public_name_has_a_reference_entry(package):
    import importlib

    module = importlib.import_module(package)
    entries = api_entries()
    missing = [name for name in module.__all__ if f"{package}.{name}" not in entries]
    assert not missing, (f"public names of {package} missing from docs/api/*.md: {missing} "
                         "(add an autodoc entry for each)")


# --- code examples -------------------------------------------------------------

PAGES_WITH_CODE = [p for p in doc_pages() + [ROOT / "README.md"] if python_blocks(p)]


def run_blocks(blocks: list[str], workdir: Path, timeout: float = 300):
    script = workdir / "doc_example.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALSCHED_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["BROWSER"] = "true"  # an example that shows a page must not start a browser
    return subprocess.run([sys.executable, str(script)], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_a_failing_example_fails(tmp_path):
    # The runner reports an example that raises (so a broken page cannot pass).
    result = run_blocks(["x = 1", "assert x == 2, 'the example broke'"], tmp_path)
    assert result.returncode != 0 and "the example broke" in result.stderr


@pytest.mark.timeout(600)  # a fresh interpreter, dask, a cluster: slow on a loaded machine
@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_examples_run(page, tmp_path):
    result = run_blocks(python_blocks(page), tmp_path)
    assert result.returncode == 0, (
        f"the python examples of {page.relative_to(ROOT)} failed:\n{result.stderr[-4000:]}")


def test_every_guide_has_a_runnable_example():
    # The pages that teach an API show it in code that runs.
    for name in ("getting-started", "guides/schedulers", "guides/diagnostics", "guides/report",
                 "guides/dashboard", "guides/cluster"):
        assert python_blocks(DOCS / f"{name}.md"), f"docs/{name}.md has no python example"


# --- the built site ------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("sphinx")
    pytest.importorskip("pydata_sphinx_theme")
    pytest.importorskip("myst_parser")
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert build.returncode == 0, f"sphinx-build failed or warned:\n{build.stderr[-4000:]}"
    return out / "html"


def site_pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html")
                  if p.relative_to(site).parts[0] not in ("_static", "_sources", "_modules"))


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"])
        if tag == "a" and values.get("name"):
            self.ids.add(values["name"])
        for attr in ("href", "src"):
            if values.get(attr) and tag in ("a", "link", "img", "script"):
                self.links.append(values[attr])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def broken_links(site: Path) -> list[str]:
    """Internal links of the site's pages whose file or anchor does not exist."""
    parsed: dict[Path, _Links] = {}

    def get(path: Path) -> _Links:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    broken = []
    for page in site_pages(site):
        for link in get(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("mailto:"):
                continue  # external: not this test's business
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(site)} -> {link}"
            if not target.is_file():
                broken.append(f"{where}: no such file")
            elif parts.fragment and target.suffix == ".html" and \
                    unquote(parts.fragment) not in get(target).ids:
                broken.append(f"{where}: no such anchor")
    return broken


def test_the_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "a.html").write_text('<a href="b.html">b</a><a href="#here">x</a>'
                                     '<a href="a.html#there">y</a><p id="there"></p>',
                                     encoding="utf-8")
    assert broken_links(tmp_path) == ["a.html -> b.html: no such file",
                                      "a.html -> #here: no such anchor"]


@pytest.mark.timeout(900)  # includes building the site (the module's fixture)
def test_site_internal_links_resolve(site):
    assert len(site_pages(site)) >= 15
    assert broken_links(site) == []


@pytest.mark.timeout(900)
def test_site_pages_open_in_chromium_without_errors(site, tmp_path):
    require_chromium()
    pages = site_pages(site)
    # One browser for every page: each page in a frame of one harness page
    # (errors of frames reach the same DevTools session), plus a page that
    # logs an error on purpose, which proves errors are heard.
    canary = tmp_path / "canary.html"
    canary.write_text("<script>console.error('canary: errors are heard')</script>",
                      encoding="utf-8")
    frames = "".join(f'<iframe src="{p.as_uri()}" width="1200" height="800"></iframe>'
                     for p in pages + [canary])
    harness = tmp_path / "harness.html"
    harness.write_text(f"<!doctype html><html><body>{frames}</body></html>", encoding="utf-8")
    loaded = ("[...document.querySelectorAll('iframe')].every("
              "f => f.contentDocument && f.contentDocument.readyState === 'complete')")
    report = ("[...document.querySelectorAll('iframe')].map(f => ["
              "f.src, f.contentDocument.title,"
              "[...f.contentDocument.images].filter(i => !i.complete || !i.naturalWidth)"
              ".map(i => i.src)])")
    result = open_in_chromium(harness, wait_for=loaded, evaluate=report, timeout=120)
    assert result.ready, "the site's pages did not all load"
    assert result.errors == ["console.error: canary: errors are heard"]
    frames_seen = result.value[:-1]
    assert len(frames_seen) == len(pages)
    for src, title, broken_images in frames_seen:
        assert "localsched" in title, f"{src} did not load as a page of the site ({title!r})"
        assert broken_images == [], f"{src} has images that did not load: {broken_images}"


# --- the README ------------------------------------------------------------------

README = ROOT / "README.md"


def test_readme_fits_on_a_page():
    size = len(README.read_bytes())
    assert size <= 10_000, f"README.md is {size} bytes; keep it under 10 KB (guides go to docs/)"


def test_readme_gives_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_make_demo_installs_what_getting_started_imports():
    """After ``make demo`` (``pip install -e ".[demo]"``), getting started's
    first dask example runs: every module its first Python block imports is
    localsched's own, a core dependency or the demo extra's."""
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert '.[demo]"' in makefile
    wanted = project["dependencies"] + project["optional-dependencies"]["demo"]
    brought = {re.split(r"[\[<>=; ]", w, maxsplit=1)[0].lower() for w in wanted}
    extras = {w.split("[", 1)[1].split("]", 1)[0] for w in wanted if "[" in w}
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    first = re.search(r"^```python\n(.*?)^```", page, re.S | re.M).group(1)
    imported = set(re.findall(r"^\s*(?:import|from)\s+([\w.]+)", first, re.M))
    assert "dask.array" in imported
    for name in imported:
        top = name.split(".")[0]
        assert top in brought | {"localsched"}, f"{name}: not installed by make demo"
    assert "array" in ",".join(extras), "dask.array needs dask[array]"


def test_readme_links_and_pictures_resolve():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t for t in targets if not urlsplit(t).scheme]
    assert local, "the README links to the docs"
    missing = [t for t in local if not (ROOT / unquote(urlsplit(t).path)).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"


# --- the command lines the docs show --------------------------------------------

BASH_FENCE = re.compile(r"^```(?:bash|text)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def documented_command_lines() -> list[tuple[str, str]]:
    """(page, line) for every ``localsched ...`` command in a bash/text block."""
    found = []
    for page in doc_pages() + [README]:
        for block in BASH_FENCE.findall(page.read_text(encoding="utf-8")):
            for line in block.splitlines():
                line = line.split("#", 1)[0].strip()
                line = re.sub(r"^(\.venv/bin/|python -m )", "", line)
                if line.startswith("localsched "):
                    found.append((page.name, line))
    return found


def test_documented_options_exist():
    # Every --option a documented `localsched SUBCOMMAND ...` line uses is
    # one that subcommand's parser knows.
    from localsched.command.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "profile" in a.choices)
    lines = documented_command_lines()
    assert len(lines) >= 10
    for page, line in lines:
        words = line.split()
        sub = subparsers.choices.get(words[1])
        assert sub is not None, f"{page}: unknown subcommand in {line!r}"
        known = {opt for action in sub._actions for opt in action.option_strings}
        for word in words[2:]:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in known, f"{page}: {word} unknown in {line!r}"


def test_the_settings_table_lists_every_setting_users_may_set():
    # One table (docs/guides/settings.md) names every environment variable
    # and dask config key of ``localsched.system.settings``, and no other; no
    # other page lists the tests' platform simulations as users' settings.
    from localsched.system import settings

    table = (DOCS / "guides" / "settings.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([^`]+)` \|", table, re.M))
    assert listed == set(settings.ENVIRONMENT) | set(settings.CONFIG)
    for page in doc_pages():
        assert "SIMULATE" not in page.read_text(encoding="utf-8"), page
