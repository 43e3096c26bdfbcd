"""The house rules of DESIGN.md that code review alone lets slip: apps stand side by side, modules stay
small enough to read, and the platform layer has no import loops."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("annotate", "labeler", "corpora")
PACKAGES = ("dataplatform", *APPS, "frontend")
MAX_LINES = 450
# A task module that imports its services lazily, inside the task, is the one loop allowed.
ALLOWED_LOOPS = [{"dataplatform.jobs.services", "dataplatform.jobs.tasks"}]


def _production_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts or "node_modules" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


MODULES = _production_modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules `name` imports, anywhere in it (a function's own imports too)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from package import module` needs the module; `from module import name`, the module.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_no_app_imports_another_app():
    crossings = sorted(f"{name} imports {target}" for name, targets in GRAPH.items() for target in targets
                       if name.split(".")[0] in APPS and target.split(".")[0] in APPS
                       and target.split(".")[0] != name.split(".")[0])
    assert crossings == []


def test_the_platform_layer_imports_no_app_at_module_level_except_to_wire_them():
    """dataplatform/ may only name the apps where it wires them in (the URLconf)."""
    wiring = {"dataplatform.urls"}
    crossings = sorted(f"{name} imports {target}" for name, targets in GRAPH.items() for target in targets
                       if name.startswith("dataplatform") and name not in wiring
                       and target.split(".")[0] in APPS)
    assert crossings == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_longer_than_a_newcomer_reads(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {lines} lines; split it by concern"


# A view that reads its form field by field parses input on its own, beside the serializer the API uses for the
# same use case (dataplatform/inputs.py). request_guard.py reads request.POST whole, to refuse bytes no column stores.
READS_A_FIELD = re.compile(r"request\.POST(\[|\.get\(|\.getlist\()")
READS_REQUEST_WHOLE = {"dataplatform.request_guard"}


# annotate and labeler are cleaned on their own branch (h2, issue 39): until it is merged, their two cases fail.
@pytest.mark.parametrize("package", ["annotate", "labeler", "corpora", "dataplatform"])
def test_no_view_reads_the_form_field_by_field(package):
    readers = sorted(f"{MODULES[name].relative_to(ROOT)}:{number}" for name in MODULES
                     if name.split(".")[0] == package and name not in READS_REQUEST_WHOLE
                     for number, line in enumerate(MODULES[name].read_text(encoding="utf-8").splitlines(), 1)
                     if READS_A_FIELD.search(line))
    assert readers == [], "pass request.POST whole to the use case's input serializer (dataplatform/inputs.py)"


def _loops() -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in GRAPH[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                loops.append(component)

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return loops


def test_no_import_loops_but_the_task_module_s():
    assert [loop for loop in _loops() if loop not in ALLOWED_LOOPS] == []
