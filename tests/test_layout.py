"""The package layout holds: every module imports on its own, imports form no cycle (function-
level imports included), no layer imports a layer above it, and the layers that need no TVM
load without it. The layer order is written once, here (ARCHITECTURE.md explains it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top: a module may import its own layer and the layers before it. `testing` (the
# model builder) and `ir` import nothing of ours.
LAYERS = (
    "cascader.testing",
    "cascader.ir",
    "cascader.core",
    "cascader.reference",
    "cascader.simulator",
    "cascader.ethosu",
    "cascader.schedule",
    "cascader.frontend",
    "cascader.lowering",
    "cascader.estimate",
    "cascader.pipeline",
    "cascader.verify",
    "cascader.artifact",
    "dse",
)
# Layers that may import fewer than all those below them.
ONLY = {
    "cascader.testing": set(),
    "cascader.ir": set(),
    "cascader.core": set(),
    "cascader.reference": {"cascader.ir"},
    "cascader.simulator": {"cascader.ir", "cascader.reference"},
}
# Packages that run without TVM (the graph-JSON core, the numpy reference and simulator, the
# Ethos-U device model and the design point types).
NO_TVM = (
    "cascader.ir",
    "cascader.core",
    "cascader.reference",
    "cascader.simulator",
    "cascader.ethosu",
    "cascader.schedule",
    "cascader.estimate",
)


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("cascader", "dse"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _layer(module: str) -> str:
    for layer in LAYERS:
        if module == layer or module.startswith(layer + "."):
            return layer
    if module == "cascader":
        return "cascader"
    raise AssertionError(f"{module} belongs to no layer; add its package to LAYERS")


def _imports(module: str, path: Path) -> set[str]:
    """Every module of ours `module` imports, at any depth of its code."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in MODULES}
    return found - {module}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def test_every_module_belongs_to_a_layer() -> None:
    for module in MODULES:
        _layer(module)


def test_no_layer_imports_one_above_it() -> None:
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    rank["cascader"] = -1  # the top package's docstring module
    wrong = []
    for module, targets in GRAPH.items():
        mine = _layer(module)
        for target in targets:
            theirs = _layer(target)
            allowed = ONLY.get(mine, {layer for layer in LAYERS if rank[layer] < rank[mine]})
            if theirs != mine and theirs != "cascader" and theirs not in allowed:
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over the module graph: none larger than one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(GRAPH)))
    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert not cycles, cycles


_IMPORT_EACH = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("cascader", "dse")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException as error:
        failed.append(f"{name}: {type(error).__name__}: {error}")
print("\\n".join(failed))
"""


def test_every_module_imports_on_its_own() -> None:
    """Each module imported first, with none of ours loaded yet (third-party packages stay
    loaded between them: what breaks an import on its own is an order among ours)."""
    run = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH, *sorted(m for m in MODULES if "__main__" not in m)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert run.stdout.strip() == ""


@pytest.mark.parametrize("package", NO_TVM)
def test_layers_below_the_frontend_need_no_tvm(package: str) -> None:
    names = sorted(m for m in MODULES if _layer(m) == package)
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "assert 'tvm' not in sys.modules, 'tvm was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
