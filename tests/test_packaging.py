"""The package as an index and a user receive it: the wheel and the sdist.

One build (``python -m build --no-isolation``, with the setuptools the test
extras install) of a clean copy of the source tree, then:

* the metadata an index page shows: classifiers (Python versions,
  operating systems, ``Framework :: Dask``), project URLs, the license, and
  the README as a long description that renders (readme_renderer, what
  ``twine check`` runs);
* the sdist holds what a rebuild needs;
* the wheel, installed with its dependencies into a fresh virtual
  environment (no site packages of ours; pip's cache makes this quick), runs
  a computation with the four diagnostics and writes a report -- from an
  empty directory, so nothing of the source tree is imported by accident.
"""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Installing bokeh, numpy and the rest from pip's cache takes 20-60 s here.
pytestmark = pytest.mark.timeout(900)


def _source_files() -> list[Path]:
    """The tracked files (what a fresh clone has), else the tree minus build output."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                                check=True, timeout=60).stdout.decode().split("\0")
        return [ROOT / name for name in listed if name and (ROOT / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "dist", "_build", "__pycache__", ".pytest_cache"}
        return [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.parts)]


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("build")
    source = tmp_path_factory.mktemp("source")
    for path in _source_files():
        target = source / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                            str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, \
        f"python -m build failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def wheel_metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(zf.read(name).decode())


def test_metadata_for_an_index_page(dists):
    meta = wheel_metadata(dists["wheel"])
    classifiers = meta.get_all("Classifier")
    for version in ("3.10", "3.11", "3.12", "3.13", "3.14"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    for wanted in ("Framework :: Dask", "Operating System :: OS Independent",
                   "Operating System :: POSIX :: Linux", "Operating System :: MacOS",
                   "Operating System :: Microsoft :: Windows"):
        assert wanted in classifiers
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Documentation", "Source", "Changelog"} <= set(urls)
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert meta["Requires-Python"] == ">=3.10"


def test_long_description_renders(dists):
    from readme_renderer.markdown import render

    meta = wheel_metadata(dists["wheel"])
    assert meta["Description-Content-Type"].startswith("text/markdown")
    body = meta.get_payload()
    assert "make demo" in body
    rendered = render(body, variant="GFM")
    assert rendered is not None, "the long description does not render"
    assert ">localsched<" in rendered and "<h1" in rendered and "<code>make demo" in rendered


def test_sdist_holds_what_a_rebuild_needs(dists):
    with tarfile.open(dists["sdist"]) as tf:
        names = {name.split("/", 1)[1] for name in tf.getnames() if "/" in name}
    for needed in ("pyproject.toml", "README.md", "LICENSE", "localsched/__init__.py",
                   "localsched/py.typed", "localsched/diagnostics/__init__.py"):
        assert needed in names, f"{needed} missing from the sdist"


SMOKE = r"""
import os, sys
from operator import add
import localsched, localsched.multiprocessing
from localsched.diagnostics import Profiler, ResourceProfiler, CacheProfiler, ProgressBar

assert localsched.__file__.startswith(sys.prefix), localsched.__file__
dsk = {"a": 1, "b": (add, "a", 2), "c": (sum, ["a", "b"])}
for get in (localsched.get, localsched.multiprocessing.get):
    with Profiler() as prof, ResourceProfiler(dt=0.1) as rprof, \
            CacheProfiler() as cprof, ProgressBar(out=sys.stderr):
        assert get(dsk, "c") == 4
    assert sorted(t.key for t in prof.results) == ["b", "c"], prof.results
    assert rprof.results and len(cprof.results) == 2
with localsched.performance_report("report.html"):
    localsched.compute(localsched.delayed(sum)([1, 2, 3]))
assert os.path.getsize("report.html") > 10_000
print("smoke ok")
"""


def test_wheel_installs_and_works_in_a_fresh_venv(dists, tmp_path):
    env_dir = tmp_path / "venv"
    # (without a pip of its own: this interpreter's pip installs into it with
    # --python; ensurepip took 20-70 s on a busy machine)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True,
                   timeout=300)
    python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    environ = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                                "-q", str(dists["wheel"])],
                               capture_output=True, text=True, timeout=840, env=environ)
    assert installed.returncode == 0, f"pip install failed:\n{installed.stderr[-3000:]}"
    work = tmp_path / "work"
    work.mkdir()
    smoke = subprocess.run([str(python), "-c", SMOKE], cwd=work, capture_output=True,
                           text=True, timeout=300, env=environ)
    assert smoke.returncode == 0 and "smoke ok" in smoke.stdout, smoke.stderr[-3000:]
    command = subprocess.run([str(python), "-m", "localsched", "--version"], cwd=work,
                             capture_output=True, text=True, timeout=120, env=environ)
    assert command.returncode == 0 and "localsched" in command.stdout + command.stderr
