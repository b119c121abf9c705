"""The import rules of ARCHITECTURE.md and the size limit of a module, checked by reading the source (``ast``):

- ``portal`` (the ground floor; ``portal/marketplace`` is the top floor) never imports ``billing``, ``datasets``,
  ``instances`` or ``portal.marketplace`` at module level, and ``billing`` (floor 1) never imports ``instances``,
  ``datasets`` or ``portal.marketplace`` at module level (a function-level import, e.g. the budget guard's call
  of ``instances.services.instance_stop``, or a ``portal.hooks`` signal is the documented way up);
- (``test_architecture_scoping.py``: every console view and API view reaches an organization's objects through
  ``portal.scoping``;)
- the training runtime (``instances/runtime``) and the model server (``instances/serving/server.py``) never
  import Django, directly or through a first-party module they import;
- no two apps (``portal.marketplace`` and ``portal.webhooks`` counted as apps) import each other at module level,
  directly or around a longer loop;
- no module outside migrations and tests is over 600 lines;
- every import of a higher floor, module-level or inside a function, is one of :data:`UPWARD_IMPORTS` (a new
  one fails; one that is gone must leave the list);
- outside ``instances/backends/`` nothing asks which compute backend it holds (``isinstance`` of a backend class,
  a backend name or a handle's backend prefix compared, a backend's private attribute) except the sites in
  :data:`BACKEND_QUESTIONS`, which issue 26 moves behind ``ComputeBackend``; a new one fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("portal", "billing", "datasets", "instances")
MAX_LINES = 600


def _modules(tree: ast.Module, *, module: str, top_level_only: bool) -> list[tuple[int, str]]:
    """(line, imported module) of the import statements of ``tree`` (of the module named ``module``)."""
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                package = module.split(".")[:-1]  # "a.b.c" and "a.b.__init__" both live in package "a.b"
                parts = package[: len(package) - node.level + 1]
                name = ".".join(parts + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _file_of(module: str) -> Path | None:
    """The source file of a first-party module (a package's ``__init__.py``), None when it is not one."""
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _source_files() -> list[Path]:
    files = [ROOT / "manage.py"]
    for top in (*APPS, "benchmarks", "clients"):
        files += sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else []
    return [f for f in files if "migrations" not in f.parts and "tests" not in f.parts]


def _django_imports(start: Path) -> list[str]:
    """Every ``django`` / ``rest_framework`` import reachable from ``start``: its own imports at any level and
    those of each first-party module (and the packages above it) that it imports, as "file:line module"."""
    seen: set[Path] = set()
    todo = [start]
    found = []
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        module = _module_name(path)
        packages = [p / "__init__.py" for p in path.relative_to(ROOT).parents if str(p) != "."]
        todo += [ROOT / p for p in packages if (ROOT / p).is_file()]
        for line, name in _modules(ast.parse(path.read_text(encoding="utf-8")), module=module, top_level_only=False):
            if name.split(".")[0] in ("django", "rest_framework"):
                found.append(f"{path.relative_to(ROOT)}:{line} {name}")
            elif name.split(".")[0] in APPS and (target := _file_of(name)) is not None:
                todo.append(target)
    return found


def _module_level_imports_of(top: str, forbidden: tuple[str, ...], *, skip: tuple[str, ...] = ()) -> list[str]:
    """Lines "file:line imports module", one per module-level import of a ``forbidden`` module by a file under
    ``top`` (migrations and the folders in ``skip`` left out)."""
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / top).rglob("*.py"))
        if "migrations" not in path.parts and not any(str(path.relative_to(ROOT)).startswith(s) for s in skip)
        for line, name in _modules(
            ast.parse(path.read_text(encoding="utf-8")), module=_module_name(path), top_level_only=True
        )
        if any(name == f or name.startswith(f"{f}.") for f in forbidden)
    ]


def test_billing_imports_no_higher_floor_at_module_level() -> None:
    assert _module_level_imports_of("billing", ("instances", "datasets", "portal.marketplace")) == []


def test_datasets_imports_no_higher_floor_at_module_level() -> None:
    """``datasets`` (floor 2) reaches ``instances`` (the training runtime's shard format) only inside functions."""
    assert _module_level_imports_of("datasets", ("instances", "portal.marketplace")) == []


def test_the_ground_floor_imports_no_higher_floor_at_module_level() -> None:
    """``portal`` (settings, accounts, organizations, the API framework, webhooks, ``lib``) reaches the floors
    above only inside functions or through ``portal.hooks``; the marketplace (``portal/marketplace``) is the
    top floor and may import them all."""
    forbidden = ("billing", "datasets", "instances", "portal.marketplace")
    assert _module_level_imports_of("portal", forbidden, skip=("portal/marketplace/",)) == []


def test_the_floor_check_finds_a_module_level_import() -> None:
    """The check itself: it sees ``from billing… import`` at module level and ignores one inside a function."""
    source = "from billing.selectors import wallet_balance\n\ndef f():\n    from instances import services\n"
    found = _modules(ast.parse(source), module="portal.views", top_level_only=True)
    assert [name for _, name in found] == ["billing.selectors", "billing.selectors.wallet_balance"]


@pytest.mark.parametrize(
    "start",
    [
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "instances" / "runtime").rglob("*.py")),
        "instances/serving/server.py",
        "instances/interactive/ssh_server.py",
        "instances/interactive/sidecar.py",
        "instances/interactive/metrics.py",
    ],
)
def test_the_runtime_and_the_model_server_never_import_django(start: str) -> None:
    assert _django_imports(ROOT / start) == []


def test_the_import_walk_finds_django_where_it_is_imported() -> None:
    """The walk itself: a services module reaches Django (so an empty answer above means something)."""
    assert any(" django" in hit for hit in _django_imports(ROOT / "instances" / "services" / "launch.py"))


def test_no_module_outside_migrations_and_tests_is_over_600_lines() -> None:
    sizes = {str(f.relative_to(ROOT)): len(f.read_text(encoding="utf-8").splitlines()) for f in _source_files()}
    assert len(sizes) > 100  # the walk found the apps
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


#: The units of the floor plan: the marketplace and webhooks are Django apps of their own inside ``portal/``.
UNITS = ("portal.marketplace", "portal.webhooks", "portal", "billing", "datasets", "instances")


def _unit(module: str) -> str | None:
    return next((u for u in UNITS if module == u or module.startswith(f"{u}.")), None)


def _module_level_cycles() -> list[list[str]]:
    """Each simple cycle of the graph "unit A imports unit B at module level" (migrations and tests left out),
    as its units from the smallest in ``UNITS`` order."""
    edges: dict[str, set[str]] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or "tests" in path.parts:
                continue
            module = _module_name(path)
            source = _unit(module)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for _, name in _modules(tree, module=module, top_level_only=True):
                target = _unit(name)
                if source and target and target != source:
                    edges.setdefault(source, set()).add(target)
    cycles: list[list[str]] = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                cycles.append(path)
            elif nxt not in path and UNITS.index(nxt) > UNITS.index(start):
                walk(start, nxt, [*path, nxt])

    for unit in UNITS:
        walk(unit, unit, [unit])
    return cycles


def test_the_apps_import_each_other_without_a_cycle_at_module_level() -> None:
    """Floors import downward only, so no two apps (the marketplace and webhooks counted apart from ``portal``)
    import each other, directly or around a longer loop, at module level."""
    assert _module_level_cycles() == []


#: Floors of ARCHITECTURE.md, lowest first (``portal.webhooks`` is on the ground floor with ``portal``).
FLOORS = (("portal.marketplace", 4), ("portal", 0), ("billing", 1), ("datasets", 2), ("instances", 3))

#: Every import of a higher floor as (importing file, imported package to two dotted parts). Each is inside a
#: function; the module-level rule is the tests above. A new entry needs a reason in review: most should go
#: through ``portal.hooks`` or move down a floor.
UPWARD_IMPORTS = {
    ("billing/call_sql.py", "portal.marketplace"),  # the app-call SQL writes AppCall: belongs to the marketplace
    ("billing/line_labels.py", "instances.selectors"),
    ("billing/metering.py", "instances.reasons"),
    ("billing/metering.py", "instances.selectors"),
    ("billing/metering.py", "instances.services"),  # the budget guard stops an instance
    ("billing/payments.py", "portal.marketplace"),
    ("billing/volume_metering.py", "instances.interactive"),
    ("datasets/pipeline/stages.py", "instances.runtime"),  # the training runtime's shard format
    ("portal/management/commands/runportal.py", "datasets.models"),
    ("portal/management/commands/runportal.py", "instances.models"),
    ("portal/management/commands/runportal.py", "instances.services"),
    ("portal/management/commands/runportal.py", "portal.marketplace"),
    ("portal/views.py", "billing.metering"),
    ("portal/views.py", "billing.notices"),
    ("portal/views.py", "billing.pricing"),
    ("portal/views.py", "billing.selectors"),
}


def _floor(module: str) -> int | None:
    return next((f for unit, f in FLOORS if module == unit or module.startswith(f"{unit}.")), None)


def _upward_imports(source: str, module: str) -> set[str]:
    """The higher-floor packages (two dotted parts) that ``source`` (of module ``module``) imports anywhere."""
    here = _floor(module)
    found = set()
    for _, name in _modules(ast.parse(source), module=module, top_level_only=False):
        there = _floor(name)
        if here is not None and there is not None and there > here:
            found.add(".".join(name.split(".")[:2]))
    return found


def test_every_upward_import_is_listed() -> None:
    found = {
        (str(path.relative_to(ROOT)), name)
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        for name in _upward_imports(path.read_text(encoding="utf-8"), _module_name(path))
    }
    assert sorted(found - UPWARD_IMPORTS) == [], "a new import of a higher floor: go through portal.hooks or list it"
    assert sorted(UPWARD_IMPORTS - found) == [], "an upward import that is gone: remove it from UPWARD_IMPORTS"


def test_the_upward_import_check_sees_a_function_level_import() -> None:
    source = "from portal.models import User\n\ndef f():\n    from instances.services import launch\n"
    assert _upward_imports(source, "billing.tasks") == {"instances.services"}


#: The places outside ``instances/backends/`` that still ask which backend they hold, as (file, what) → count.
#: Issue 26 turns each into a method or capability of ``ComputeBackend`` (log archive, Jupyter address, SSH
#: endpoint, volume claim, utilization source); this list may only shrink.
BACKEND_QUESTIONS = {
    ("instances/interactive/jupyter.py", "backend name compared"): 2,
    ("instances/interactive/ssh.py", "backend._core"): 4,
    ("instances/interactive/ssh.py", "handle prefix 'k8s:'"): 1,
    ("instances/interactive/ssh.py", "handle prefix 'local:'"): 1,
    ("instances/interactive/ssh.py", "isinstance(…, KubernetesBackend)"): 2,
    ("instances/interactive/ssh.py", "isinstance(…, LocalBackend)"): 1,
    ("instances/interactive/utilization.py", "handle prefix 'k8s:'"): 1,
    ("instances/interactive/utilization.py", "handle prefix 'local:'"): 1,
    ("instances/interactive/utilization.py", "isinstance(…, KubernetesBackend)"): 1,
    ("instances/interactive/volumes.py", "backend._core"): 1,
    ("instances/joblogs.py", "backend name compared"): 3,
    ("instances/joblogs.py", "handle prefix 'local:'"): 1,
    ("instances/services/runtime_config.py", "backend name compared"): 1,
}


def _backend_questions(source: str) -> list[str]:
    """What ``source`` asks of the backend it holds, one entry per site: ``isinstance(…, XBackend)`` (any class
    named ``…Backend`` but ``ComputeBackend``), ``backend name compared`` (an ``.backend`` attribute compared
    with a string), ``handle prefix 'k8s:'`` / ``'local:'`` (``.startswith`` of a backend's handle prefix) and
    ``backend._x`` (a private attribute of a name containing ``backend``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            classes = node.args[1:2]
            if classes and isinstance(classes[0], ast.Tuple):
                classes = list(classes[0].elts)
            for cls in classes:
                ident = cls.id if isinstance(cls, ast.Name) else cls.attr if isinstance(cls, ast.Attribute) else ""
                if ident.endswith("Backend") and ident != "ComputeBackend":
                    found.append(f"isinstance(…, {ident})")
        elif isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(isinstance(p, ast.Attribute) and p.attr == "backend" for p in parts) and any(
                isinstance(p, ast.Constant) and isinstance(p.value, str) for p in parts
            ):
                found.append("backend name compared")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and "backend" in node.value.id
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"backend.{node.attr}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ("k8s:", "local:")
        ):
            found.append(f"handle prefix {node.args[0].value!r}")
    return found


def test_nothing_new_outside_the_backends_asks_which_backend_it_holds() -> None:
    from collections import Counter

    found: Counter[tuple[str, str]] = Counter()
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if "migrations" in path.parts or rel.startswith("instances/backends/"):
                continue
            found.update((rel, what) for what in _backend_questions(path.read_text(encoding="utf-8")))
    grown = {site: n for site, n in found.items() if n > BACKEND_QUESTIONS.get(site, 0)}
    shrunk = {site: n for site, n in BACKEND_QUESTIONS.items() if found.get(site, 0) < n}
    assert grown == {}, "a new question about the backend outside instances/backends/: make it a ComputeBackend method"
    assert shrunk == {}, "fewer questions than listed: lower BACKEND_QUESTIONS to what is left"


def test_the_backend_question_check_sees_each_kind() -> None:
    source = (
        "if isinstance(b, KubernetesBackend) or attempt.backend == 'local':\n"
        "    core = backend._core()\n"
        "ok = handle.startswith('k8s:') and isinstance(b, ComputeBackend)\n"
    )
    assert sorted(_backend_questions(source)) == [
        "backend name compared",
        "backend._core",
        "handle prefix 'k8s:'",
        "isinstance(…, KubernetesBackend)",
    ]
