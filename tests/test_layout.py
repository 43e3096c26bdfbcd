"""The house rules of DESIGN.md that code review alone lets slip: apps stand side by side, modules stay
small enough to read, and the platform layer stands on floors (no package imports one above it) with no import
loops."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("annotate", "labeler", "corpora")
PACKAGES = ("dataplatform", *APPS, "frontend")
MAX_LINES = 450
# A task module that imports its services lazily, inside the task, is the one loop allowed.
ALLOWED_LOOPS = [{"dataplatform.jobs.services", "dataplatform.jobs.tasks"},
                 {"dataplatform.exports.stored", "dataplatform.exports.tasks"}]

# The platform layer's floors, from the ground up. Each package of dataplatform/ (or module at its top; `dataplatform`
# is the package's own __init__) stands on one floor, and imports packages of its own floor or of the floors below,
# never of one above: at module level or inside a function alike. What a lower package shows of a higher one goes
# the other way round: the higher one registers itself (job kinds, record kinds, demo parts: found at start-up in
# each app's job_kinds.py, exporters.py, demo.py) or brings its own template fragment, which the lower page includes.
FLOORS = (
    # Ground: words and tools that know nothing of the platform's own models. Settings, the error vocabulary and the
    # translated message (errors, status: every floor words its refusals and progress with them), the kind
    # registries' base, YAML with line numbers, the request's and the database's plumbing, the Celery app.
    ("settings", "errors", "status", "registry", "yamlfile", "client_address", "after_response", "timing", "cache",
     "dbfunctions", "outbound", "postgresql", "sqlite3", "openapi", "charts", "celery"),
    # Shapes and channels the apps share, still model-free: input (imports, request limits, ids and pagination, the
    # one input layer), the claims' work queue, the conversation model and tool calls, and the broker (and the
    # workers behind it).
    ("imports", "apiutils", "inputs", "pagination", "request_guard", "claims", "conversations", "tools", "broker"),
    # Who may do what: projects, members, roles and tokens, and the audit log of what they did. One floor, as the
    # two are tied both ways (TIED_PACKAGES): every change to a project, member or token writes its audit row in
    # the same transaction, and the audit log is read only as far as the reader's roles reach.
    ("accounts", "audit"),
    # The generic Job: every row belongs to a project; it runs every kind registered from above. The kept figures
    # (tallies): a project's counts, kept by the services above.
    ("jobs", "tallies"),
    # What runs as jobs: the model backends (and the sampling job kind), the export engine, the demo project.
    ("inference", "exports", "demo"),
    # The health of all of it: database, broker, workers, model backend.
    ("system",),
    # Wiring: the URLconf, the ASGI/WSGI apps and the web server, the package's __init__ (the Celery app).
    ("urls", "asgi", "wsgi", "webserver", "dataplatform"),
)
# Packages of one floor that import each other both ways; any other such pair is a loop to break.
TIED_PACKAGES = [{"accounts", "audit"}]


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


def _imports(name: str, path: Path, modules: dict[str, Path] = MODULES) -> set[str]:
    """The modules of `modules` (the project's, or the tests') that `name` imports, anywhere in it (a function's own
    imports too)."""
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
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
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


# annotate and labeler were cleaned on their own branch (h2, issue 39), corpora and dataplatform on h3's.
@pytest.mark.parametrize("package", ["annotate", "labeler", "corpora", "dataplatform"])
def test_no_view_reads_the_form_field_by_field(package):
    readers = sorted(f"{MODULES[name].relative_to(ROOT)}:{number}" for name in MODULES
                     if name.split(".")[0] == package and name not in READS_REQUEST_WHOLE
                     for number, line in enumerate(MODULES[name].read_text(encoding="utf-8").splitlines(), 1)
                     if READS_A_FIELD.search(line))
    assert readers == [], "pass request.POST whole to the use case's input serializer (dataplatform/inputs.py)"


def _loops(graph: dict[str, set[str]] = GRAPH) -> list[set[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm): modules, or packages."""
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
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

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return loops


def test_no_import_loops_but_the_task_module_s():
    assert [loop for loop in _loops() if loop not in ALLOWED_LOOPS] == []


def _platform_package(module: str) -> str | None:
    """The floor-keeping unit of a module of dataplatform/: its package or top module (`dataplatform` for the
    package's own __init__); None outside dataplatform/."""
    parts = module.split(".")
    if parts[0] != "dataplatform":
        return None
    return parts[1] if len(parts) > 1 else parts[0]


FLOOR_OF = {package: number for number, floor in enumerate(FLOORS) for package in floor}
PLATFORM_IMPORTS = sorted((name, target) for name, targets in GRAPH.items() for target in targets
                          if _platform_package(name) and _platform_package(target)
                          and _platform_package(name) != _platform_package(target))


def test_every_platform_package_stands_on_one_floor():
    """A new package of dataplatform/ is placed on a floor on purpose; a floor names no package that is gone."""
    placed = [package for floor in FLOORS for package in floor]
    assert len(placed) == len(set(placed)), "a package stands on two floors"
    assert set(placed) == {_platform_package(name) for name in MODULES if _platform_package(name)}


def test_no_platform_package_imports_one_above_it():
    upward = [f"{name} (floor {FLOOR_OF[_platform_package(name)]}) imports {target} "
              f"(floor {FLOOR_OF[_platform_package(target)]})" for name, target in PLATFORM_IMPORTS
              if FLOOR_OF[_platform_package(target)] > FLOOR_OF[_platform_package(name)]]
    assert upward == []


def test_packages_of_one_floor_import_each_other_one_way_only():
    packages = {package: set() for package in FLOOR_OF}
    for name, target in PLATFORM_IMPORTS:
        packages[_platform_package(name)].add(_platform_package(target))
    assert [loop for loop in _loops(packages) if loop not in TIED_PACKAGES] == []


# --- the tests mirror the code ------------------------------------------------------------------------------------

TESTS = ROOT / "tests"
# Folders of tests that cross every package, so mirror none: pages in a real browser, whole processes (workers, web
# servers), the API fuzzed from its schema, hostile input at every importer and door. tests/fixtures holds data.
SUITE_WIDE_FOLDERS = {"browser", "integration", "fuzz", "hostile", "fixtures"}


def _test_modules() -> dict[str, Path]:
    return {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
            for path in TESTS.rglob("*.py")}


def _is_a_test(module: str) -> bool:
    return module.rpartition(".")[2].startswith("test_")


def test_no_test_module_imports_another():
    """What tests share lives in support modules beside them (tests/doubles.py, tests/worker.py,
    tests/corpora/aed/curation.py, ...): a helper kept in a test module goes when that test is moved or deleted,
    and its importer runs the other module's setup besides."""
    modules = _test_modules()
    crossings = sorted(f"{name} imports {target}" for name, path in modules.items() if _is_a_test(name)
                       for target in _imports(name, path, modules) if _is_a_test(target))
    assert crossings == []


def _mirrored_package(folder: Path) -> Path | None:
    """The package a folder of tests mirrors: tests/<app>/... is <app>/..., tests/<package>/... is
    dataplatform/<package>/..., tests/bench is bench/ (its scripts are not a package)."""
    parts = folder.relative_to(TESTS).parts
    if parts[0] == "bench":
        return ROOT / "bench" if len(parts) == 1 else None
    for package in (ROOT.joinpath(*parts), ROOT.joinpath("dataplatform", *parts)):
        if (package / "__init__.py").is_file():
            return package
    return None


def test_every_test_folder_mirrors_a_package_of_the_code():
    """tests/ is laid out as the code is, so a package's tests are found where the package is; a folder named after no
    package (or after one that is gone) is a misplaced one. The suite-wide folders are named in SUITE_WIDE_FOLDERS."""
    folders = [path for path in TESTS.rglob("*") if path.is_dir() and path.name != "__pycache__"
               and path.relative_to(TESTS).parts[0] not in SUITE_WIDE_FOLDERS]
    assert sorted(str(folder.relative_to(ROOT)) for folder in folders if _mirrored_package(folder) is None) == []


@pytest.mark.parametrize("package", ["aed", "atd"])
def test_each_corpus_s_tests_are_in_its_own_folder(package):
    """corpora/aed and corpora/atd are tested in tests/corpora/aed and tests/corpora/atd (named without the prefix);
    tests/corpora/ keeps what tests both."""
    assert (TESTS / "corpora" / package / "__init__.py").is_file()
    assert sorted(path.name for path in (TESTS / "corpora").glob(f"test_{package}_*.py")) == []
