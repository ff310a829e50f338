"""Sphinx configuration of the daskauc documentation site.

Build (from the repository root): ``sphinx-build -W --keep-going -b html docs docs/_build/html``.
The pages are the Markdown files of ``docs/`` (MyST), the API reference is generated from the
numpydoc docstrings, and the examples gallery runs ``examples/plot_*.py`` (sphinx-gallery).
"""

from __future__ import annotations

import os
import sys

import matplotlib

matplotlib.use("Agg")

# the checkout's package, not whichever daskauc happens to be installed
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import daskauc  # noqa: E402

project = "daskauc"
author = "the daskauc developers"
copyright = "the daskauc developers"
release = daskauc.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinx-mathjax-offline",  # MathJax served from _static: the math renders without a network
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "benchmarks/reproduce",  # cached rows and tables of the reproduction, included, not pages
    "**.json",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.pickle",
]

# --- MyST (the Markdown pages) -----------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# --- API reference --------------------------------------------------------------------------
autosummary_generate = True
autodoc_default_options = {"members": True}
autodoc_typehints = "none"  # numpydoc's parameter lists say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()



def _skip_sklearn_members(app, what, name, obj, skip, options):
    """Leave out what every estimator inherits from scikit-learn (``get_params``,
    ``set_output``, the metadata-routing ``set_*_request`` ...): their docstrings belong to
    scikit-learn's site and refer to its glossary."""
    module = getattr(obj, "__module__", None) or ""
    if module.startswith("sklearn."):
        return True
    return None


# --- examples gallery -----------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "doc_module": ("daskauc",),
    "backreferences_dir": None,
    "show_memory": False,
    "min_reported_time": 0,
}

# --- HTML -----------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"daskauc {release}"
# _static holds the screenshots of the README / closing notes; absent in a checkout without them
html_static_path = ["_static"] if os.path.isdir(os.path.join(ROOT, "docs", "_static")) else []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
# the left sidebar lists a section's sub-pages: keep it where there are some
html_sidebars = {
    page: []
    for page in ("index", "getting_started", "user_guide", "algorithms", "choosing", "kernel",
                 "least_squares", "cluster", "robustness", "reproduction", "changelog", "api")
}


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_members)
