"""The package layout holds: every module imports on its own, imports form no cycle (function-
level imports included), no layer imports a layer above it, the layers that need no TVM
load without it, and no layer reads another's private names. The layer order is written
once, here (ARCHITECTURE.md explains it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top: a module may import its own layer and the layers before it. `memo` (the one
# memo type and the caches' switch) and `testing` (the model builder) import nothing of ours,
# `ir` only `memo`.
LAYERS = (
    "cascader.memo",
    "cascader.testing",
    "cascader.ir",
    "cascader.core",
    "cascader.reference",
    "cascader.simulator",
    "cascader.ethosu",
    "cascader.timing",
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
    "cascader.memo": set(),
    "cascader.testing": set(),
    "cascader.ir": {"cascader.memo"},
    "cascader.core": {"cascader.memo"},
    "cascader.reference": {"cascader.memo", "cascader.ir"},
    "cascader.simulator": {"cascader.memo", "cascader.ir", "cascader.reference"},
}
# Packages that run without TVM (the graph-JSON core, the numpy reference and simulator, the
# Ethos-U device model, the timed cycles of a stream and the design point types).
NO_TVM = (
    "cascader.memo",
    "cascader.ir",
    "cascader.core",
    "cascader.reference",
    "cascader.simulator",
    "cascader.ethosu",
    "cascader.timing",
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


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, assigned names and
    attributes (`self._x = ...`), parameters and `__slots__` entries."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            found |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return {name for name in found if isinstance(name, str) and _private(name)}


def _defined_per_layer(trees: dict[str, ast.AST]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for module, tree in trees.items():
        found.setdefault(_layer(module), set()).update(_defined(tree))
    return found


TREES = {module: ast.parse(path.read_text()) for module, path in MODULES.items()}
DEFINED = _defined_per_layer(TREES)


def _private_reads(module: str, tree: ast.AST) -> list[str]:
    """`module`'s reads of another layer's private names (see the test)."""
    mine = _layer(module)
    elsewhere = set().union(*(names for layer, names in DEFINED.items() if layer != mine))
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
            if _layer(node.module) != mine:
                names = [alias.name for alias in node.names if _private(alias.name)]
                wrong += [f"{module} imports {node.module}.{name}" for name in names]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and _private(node.attr)
            and node.attr in elsewhere - DEFINED.get(mine, set())
        ):
            wrong.append(f"{module}:{node.lineno} reads .{node.attr}")
    return wrong


def test_no_layer_reads_another_layer_s_private_names() -> None:
    """A name with one leading underscore belongs to the layer (LAYERS) that defines it. A
    module of one layer may not (1) import such a name from a module of another layer, nor
    (2) read an attribute `x._name` where `_name` is defined in another layer's modules and
    in none of its own ("defined": a function, class, parameter or `__slots__` entry of that
    name, or a name or attribute assigned). Private names of third-party packages are not
    ours to check; a name both layers define passes (types are not known statically)."""
    wrong = [line for module, tree in TREES.items() for line in _private_reads(module, tree)]
    assert not wrong, "\n".join(wrong)


def test_the_private_name_rule_catches_a_cross_layer_read() -> None:
    """The rule, on code an Ethos-U module could hold: the core's Propagator private array
    and a private core name, read from `cascader.ethosu`."""
    assert "_linear" in DEFINED["cascader.core"]
    code = "from cascader.core.single_plans_tvm import _SMALL\nlinear = propagator._linear\n"
    found = _private_reads("cascader.ethosu.part", ast.parse(code))
    assert found == [
        "cascader.ethosu.part imports cascader.core.single_plans_tvm._SMALL",
        "cascader.ethosu.part:2 reads ._linear",
    ]


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


# Test folders that check the project across its layers rather than one of them.
ACROSS_LAYERS = {"fuzz"}


def test_the_test_folders_mirror_the_layers() -> None:
    """Each folder of tests/ is named after the layer it tests (`tests/core` for
    `cascader.core`, `tests/dse` for `dse`), so a change's tests are found by its package;
    hostile input across every layer is the one exception (ACROSS_LAYERS)."""
    layers = {name.rsplit(".", 1)[-1] for name in LAYERS}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name[0] not in "._"}
    assert folders - ACROSS_LAYERS <= layers, sorted(folders - ACROSS_LAYERS - layers)
