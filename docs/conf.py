"""Sphinx configuration of localsched's documentation (``make docs``).

The pages are MyST Markdown; the API reference is autodoc from the
docstrings; screenshots come from ``docs/_static/gallery/``, which the tests
fill (the ``gallery`` directive of ``_ext/gallery.py`` shows a picture only
once its file exists).  ``docs/notes/`` holds notes that helpers leave for
the docs, folded into the guides by hand: it is not part of the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import localsched  # noqa: E402

project = "localsched"
author = "the localsched developers"
copyright = "2026, the localsched developers"
release = localsched.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "gallery",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "notes", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

napoleon_google_docstring = False
napoleon_numpy_docstring = True

# Docstrings name parameter types in prose ("key or nested list of keys"):
# a word such as "key" that several records have as a field is ambiguous as
# a cross-reference, and it is not meant as one.
suppress_warnings = ["ref.python"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "pydata_sphinx_theme"
html_title = "localsched"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    # the pages of wide tables give the page's width to them
    "secondary_sidebar_items": {
        "**": ["page-toc", "sourcelink"],
        "benchmarks": [],
        "explanation/performance": [],
        "changelog": [],
    },
}
html_sidebars = {"changelog": [], "benchmarks": []}
# The theme's light/dark switch starts in "auto" (an unset mode makes it log
# a console error on every page).
html_context = {"default_mode": "auto"}
