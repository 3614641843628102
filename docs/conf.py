"""Sphinx configuration of the gradtx documentation (`make docs`).

The site is built offline and with warnings as errors:

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST, read by myst-nb) and the notebooks of `notebooks/`, executed at
build time; the API reference (`docs/api/`) is autodoc over gradtx's Google-style
docstrings (napoleon); formulas are rendered by a MathJax bundled with the
`sphinx-mathjax-offline` package, so no page loads anything from the internet.

The notebooks: Sphinx reads documents from its source directory (`docs/`) only, and the
notebooks live in `notebooks/` beside it, where `make test` runs them and people open them
with Jupyter. A symlink breaks on checkouts without symlinks and makes Sphinx see two paths
for one file; making the repository root the source directory would put every URL under
`docs/` and have Sphinx walk `.venv/`. So this file copies `notebooks/*.ipynb` to
`docs/notebooks/` (ignored by git; the copy is refreshed only when a notebook changed, so
an unchanged notebook is neither re-read nor re-executed) before Sphinx reads anything.
Edit the notebooks in `notebooks/`, never the copies.

Execution: `nb_execution_mode = "cache"` runs each notebook once in a fresh kernel and keeps
its outputs in a jupyter-cache under `docs/_build/.jupyter_cache`, keyed by the code cells: a
rebuild re-executes only notebooks whose code changed (`rm -rf docs/_build` forces all). A
cell that raises, or runs past 300 s, fails the build.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import sys

from sphinx.application import Sphinx
from sphinx.util import logging

import gradtx

_log = logging.getLogger(__name__)

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))  # this site's extensions (gradtx_xref)


def _copy_notebooks() -> None:
    """Mirrors `notebooks/*.ipynb` into `docs/notebooks/`, touching only what changed."""
    src, dst = ROOT / "notebooks", DOCS / "notebooks"
    dst.mkdir(exist_ok=True)
    wanted = {p.name: p for p in sorted(src.glob("*.ipynb"))}
    for stale in dst.iterdir():
        if stale.name not in wanted:
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()
    for name, path in wanted.items():
        copy = dst / name
        if not copy.exists() or copy.read_bytes() != path.read_bytes():
            shutil.copyfile(path, copy)


_copy_notebooks()

# -- Project ----------------------------------------------------------------------------------
project = "gradtx"
author = "the gradtx authors"
copyright = "the gradtx authors, Apache-2.0"  # (Sphinx's name for it)
release = gradtx.__version__
version = release

# -- General ----------------------------------------------------------------------------------
extensions = [
    "myst_nb",  # Markdown pages (it loads myst-parser itself) and executed notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # bundles MathJax 3 into _static/: formulas render offline
    "gradtx_xref",  # docs/_ext/: inline code renders as code and links to its entry
]
# No sphinx.ext.viewcode: the public names are re-exports (`gradtx.adam` is defined in
# gradtx.optimizers._tf), and viewcode files an object's "[source]" backlink under the first
# module path documented from the same file, giving broken anchors; its pages are also kept
# stale by incremental builds.
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "**/README.md",
    "**/.ipynb_checkpoints",
    "Thumbs.db",
    ".DS_Store",
]
templates_path: list[str] = []
# Single backticks in the docstrings (reStructuredText): code, a link where the name is documented
# (docs/_ext/gradtx_xref.py), not Sphinx's default italics.
default_role = "gradtx-code"
nitpicky = False  # docstrings name jax/numpy/optax objects that have no page here (no intersphinx offline)

# -- MyST -------------------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3  # `[text](page.md#a-heading)` resolves for headings down to ###
myst_dmath_double_inline = True

# -- Notebooks (myst-nb) ----------------------------------------------------------------------
nb_execution_mode = "cache"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True  # the traceback of a failing cell goes into the build log
nb_execution_excludepatterns: list[str] = []
nb_merge_streams = True
# stderr is not rendered: it holds library logging only (TensorFlow's C++ oneDNN and absl
# notices in 03, which ignore TF_CPP_MIN_LOG_LEVEL); what a notebook means to show, it prints.
nb_output_stderr = "remove"

# -- autodoc / napoleon -----------------------------------------------------------------------
# No type hints on the pages: gradtx's are precise but long (`Annotated[float | int | Array |
# Callable[[Array], Any], <gradtx.hyperparameter>]` for a learning rate); the docstrings' Args
# say what each argument takes, in words, and signatures stay short.
autodoc_typehints = "none"
autodoc_preserve_defaults = True  # `mu_dtype=None`, `lr=1e-3` as written, not reprs of objects
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # NamedTuple states would inherit tuple's docstrings
add_module_names = False
python_use_unqualified_type_names = True
autosummary_generate = True

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True
napoleon_use_param = True
napoleon_include_init_with_doc = False
napoleon_preprocess_types = True
napoleon_attr_annotations = True

# -- HTML -------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"gradtx {release}"
html_static_path = ["_static"]
html_css_files = ["gradtx.css"]
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "navigation_with_keys": True,
}


# -- Hooks ------------------------------------------------------------------------------------
_NOTEBOOK_LINK = re.compile(
    r"\]\((?P<path>[^)\s#]*notebooks/(?P<name>[\w.-]+\.ipynb))(?P<anchor>#[^)\s]*)?\)"
)


def _link_notebook_copies(app: Sphinx, docname: str, source: list[str]) -> None:
    """Points Markdown links at `notebooks/x.ipynb` to the executed page of its copy.

    A page links a notebook where it lives in the repository (`../../notebooks/x.ipynb` from
    `docs/guides/`), which GitHub follows; that file is outside Sphinx's source directory, so
    the link is rewritten, in the text Sphinx reads, to the copy in `docs/notebooks/`.
    """
    page_dir = (DOCS / docname).parent
    copies = DOCS / "notebooks"

    def rewrite(match: re.Match[str]) -> str:
        target = (page_dir / match["path"]).resolve()
        if target.parent != ROOT / "notebooks" or not (copies / match["name"]).exists():
            return match[0]
        new = os.path.relpath(copies / match["name"], page_dir)
        return f"]({pathlib.PurePath(new).as_posix()}{match['anchor'] or ''})"

    source[0] = _NOTEBOOK_LINK.sub(rewrite, source[0])


def _check_gallery(app: Sphinx) -> None:
    """Warns (an error under -W) when the gallery page has no line for a notebook."""
    text = (DOCS / "gallery.md").read_text()
    for path in sorted((DOCS / "notebooks").glob("*.ipynb")):
        if f"notebooks/{path.stem}" not in text:
            _log.warning("docs/gallery.md has no line for notebooks/%s", path.name)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("source-read", _link_notebook_copies)
    app.connect("builder-inited", _check_gallery)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
