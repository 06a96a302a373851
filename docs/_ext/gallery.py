"""The ``gallery`` directive: a screenshot from ``docs/_static/gallery/``.

The gallery's PNG files are written by the tests that open the real report
and the real dashboard in headless Chromium; nothing there is drawn by hand.
A page names a file::

    ```{gallery} report-summary.png
    :alt: The performance report's summary
    ```

and gets the picture (with the directive's content as its caption) when the
file exists, or a sentence saying which file the gallery has not produced
yet, so the site builds before the tests ever ran.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives

GALLERY = Path(__file__).resolve().parent.parent / "_static" / "gallery"


class Gallery(Directive):
    required_arguments = 1
    has_content = True
    option_spec = {"alt": directives.unchanged, "width": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        alt = self.options.get("alt", name)
        if not (GALLERY / name).is_file():
            text = f"(Screenshot {name} appears here once the gallery tests have produced it.)"
            return [nodes.paragraph(text=text, classes=["gallery-missing"])]
        image = nodes.image(uri=f"/_static/gallery/{name}", alt=alt,
                            width=self.options.get("width", "100%"))
        figure = nodes.figure("", image, classes=["gallery"])
        if self.content:
            caption = nodes.caption(text=" ".join(self.content))
            figure += caption
        return [figure]


def setup(app):
    app.add_directive("gallery", Gallery)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
