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
- no module outside migrations and tests is over 600 lines.
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
