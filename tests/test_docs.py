"""Cheap checks of the documentation sources (the site itself is built by .ci/run, not here).

- every public name of ``daskauc.__all__`` has an entry in the API reference;
- every page of ``docs/`` is reachable from a toctree (or deliberately left out);
- the benchmarks index lists every benchmark page and every benchmark module, and the
  modules and tools it names exist;
- no file of the repository cites the specification that lives outside it;
- the gallery's examples have the title sphinx-gallery needs and run on the threaded scheduler.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import pytest

import daskauc

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"

#: generated or build output, never sources
GENERATED = {"_build", "generated", "auto_examples", "_templates", "_static"}
#: directories that are not the project's files
NOT_OURS = {".git", ".venv", "venv", "node_modules", "bench-data", "__pycache__",
            ".pytest_cache", ".ruff_cache", "build", "dist"}


def _pages() -> set[str]:
    """Document names (posix paths below docs/, no suffix) of every source page."""
    out = set()
    for path in DOCS.rglob("*"):
        rel = path.relative_to(DOCS)
        if path.suffix not in (".md", ".rst") or GENERATED & set(rel.parts[:-1]):
            continue
        if rel.parts[0] == "benchmarks" and len(rel.parts) > 2:  # benchmarks/reproduce/...
            continue
        if rel.as_posix() == "sg_execution_times.rst":  # written by sphinx-gallery, an orphan
            continue
        out.add(rel.with_suffix("").as_posix())
    return out


_MD_TOCTREE = re.compile(r"^```\{toctree\}\n(.*?)^```", re.S | re.M)
_RST_TOCTREE = re.compile(r"^\.\. toctree::\n((?:[ \t]+.*\n|\n)*)", re.M)


def _toctree_entries(doc: str, text: str) -> set[str]:
    blocks = _MD_TOCTREE.findall(text) + _RST_TOCTREE.findall(text)
    out = set()
    base = posixpath.dirname(doc)
    for block in blocks:
        for line in block.splitlines():
            entry = line.strip()
            if not entry or entry.startswith(":"):
                continue
            entry = re.sub(r"^.*<(.+)>$", r"\1", entry)  # "Title <name>"
            if entry.startswith("/"):
                out.add(entry.lstrip("/"))
            else:
                out.add(posixpath.normpath(posixpath.join(base, entry)))
    return out


def test_every_public_name_is_in_the_api_reference():
    api = (DOCS / "api.rst").read_text()
    listed = set(re.findall(r"^   ([A-Za-z_][\w.]*)\s*$", api, re.M))
    missing = [name for name in daskauc.__all__
               if name not in listed and name != "__version__"]
    assert not missing, f"add these to docs/api.rst: {missing}"
    assert "__version__" in api
    # and nothing listed that is not public (a stale entry would fail the build anyway)
    assert {"data.default_dataset_path", "data.load_default"} <= listed


def test_every_page_is_in_a_toctree():
    pages = _pages()
    reached = {"index"}
    for doc in sorted(pages):
        suffix = ".md" if (DOCS / f"{doc}.md").exists() else ".rst"
        reached |= _toctree_entries(doc, (DOCS / f"{doc}{suffix}").read_text())
    unreached = sorted(pages - reached)
    assert not unreached, f"pages in no toctree (add them, or exclude them in conf.py): {unreached}"
    dangling = sorted(e for e in reached - pages if not e.startswith("auto_examples/"))
    assert not dangling, f"toctree entries without a page: {dangling}"


def _is_module(name: str) -> bool:
    """Whether ``python -m name`` finds a module of this repository (a file or a package's
    ``__main__``)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def test_the_benchmarks_index_lists_every_benchmark_page_and_its_module():
    index = (DOCS / "benchmarks" / "index.md").read_text()
    for page in sorted((DOCS / "benchmarks").glob("*.md")):
        if page.stem != "index":
            assert re.search(rf"^{re.escape(page.stem)}$", index, re.M), page.name
    modules = set(re.findall(r"python -m ((?:benchmarks|tools)(?:\.[a-z_]\w*)+)", index))
    assert modules, "the index names no benchmark"
    assert not [m for m in modules if not _is_module(m)], "the index names missing modules"
    tools = set(re.findall(r"\btools/([\w.]+\.sh)\b", index))
    assert not [t for t in tools if not (ROOT / "tools" / t).is_file()]
    # and every benchmark (a public module of benchmarks/, or a package of them) is named
    benchmarks = {f"benchmarks.{p.stem}" for p in (ROOT / "benchmarks").iterdir()
                  if not p.name.startswith("_") and (p.suffix == ".py" or p.is_dir())}
    assert not sorted(benchmarks - modules), "add these to docs/benchmarks/index.md"


def _repository_text_files():
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if NOT_OURS & set(rel.parts) or (rel.parts[:2] == ("docs", "_build")):
            continue
        if rel.parts[:1] == ("docs",) and set(rel.parts[1:2]) & {"generated", "auto_examples"}:
            continue
        if path.is_file() and path.suffix in {".py", ".md", ".rst", ".txt", ".toml", ".sh",
                                              ".cfg", ".json", ""}:
            yield rel, path


def test_no_file_cites_the_specification_outside_the_repository():
    word = re.compile(r"\b" + "SP" + r"EC\b")  # spelt so that this file does not match itself
    hits = []
    for rel, path in _repository_text_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        hits += [f"{rel}:{i}" for i, line in enumerate(text.splitlines(), 1) if word.search(line)]
    assert not hits, "cite docs/algorithms.md or the paper instead: " + ", ".join(hits)


def test_gallery_examples_are_titled_and_use_the_threaded_scheduler():
    examples = sorted(EXAMPLES.glob("plot_*.py"))
    assert 3 <= len(examples) <= 5
    for path in examples:
        text = path.read_text()
        title = re.match(r'"""\n(.+)\n(=+)\n', text)
        assert title and len(title.group(2)) >= len(title.group(1)), path.name
        assert 'dask.config.set(scheduler="threads")' in text, path.name
        assert "LocalCluster" not in text and "Client(" not in text, path.name


def test_shared_parameter_docs_are_filled():
    """Every public docstring has its shared descriptions filled (no ``%(name)s`` left), the
    n_chains text is written once (daskauc/_docs.py), and a missing field fails loudly."""
    import inspect

    import daskauc
    from daskauc._docs import filled

    for name in daskauc.__all__:
        doc = inspect.getdoc(getattr(daskauc, name)) or ""
        assert "%(" not in doc, name
    assert "n_chains : int >= 1" in daskauc.SPAM.__doc__
    sources = [p.read_text() for p in Path(daskauc.__file__).parent.rglob("*.py")]
    assert sum(s.count('n_chains : int >= 1 or "auto"') for s in sources) == 1
    with pytest.raises(KeyError, match="default|combine"):
        filled("    %(n_chains)s")
