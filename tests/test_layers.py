"""The package's layers hold: import-linter's contracts (pyproject.toml) pass, an upward import breaks them, no two
modules import each other even through a chain (late imports inside functions included), and every subpackage says
what it owns and may import."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

grimp = pytest.importorskip("grimp")  # the `test` extra (import-linter), Python 3.11+

PACKAGE = ROOT / "transformer"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter's contracts of pyproject.toml checked on the package under `root`."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )


def cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module in `graph` (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root), on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while not component or component[-1] != module:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child), on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
            elif child in on_stack:
                low[module] = min(low[module], index[child])
    return found


def test_the_layers_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers_even_inside_a_function(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "transformer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (tmp_path / "transformer" / "models" / "dropout.py").open("a") as module:
        module.write("\n\ndef _upward():\n    from transformer.decoding import search\n\n    return search\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1
    assert "transformer.models.dropout -> transformer.decoding" in result.stdout


def test_no_module_imports_itself_through_a_chain():
    graph = grimp.build_graph("transformer", cache_dir=None)
    assert len(graph.modules) > 100
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "d2"), ("e", "a")]:
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == [["a", "b", "c"]]


def test_every_subpackage_says_what_it_owns_and_may_import():
    folders = [p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    assert len(folders) >= 10
    for folder in folders:
        doc = (folder / "__init__.py").read_text().split('"""')[1]
        assert "import" in doc, f"transformer/{folder.name}/__init__.py does not say what it may import"
    assert len([p for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]) <= 6
