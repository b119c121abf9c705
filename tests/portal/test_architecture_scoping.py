"""Every console view and API view reaches an organization's objects through the one scoped lookup
(``portal.scoping``), checked by reading the source (``ast``) of each view module (``views.py``, ``api.py``,
``api/views.py``):

- no ``Model.objects.get(`` where ``Model`` belongs to an organization (a foreign key path to
  ``portal.Organization``, or ``Organization`` itself): ``scoped_get_or_404(Model, organization=…, …)``;
- no ``get_object_or_404(`` at all (it knows no organization);
- the organization comes from ``request_organization(request, slug=…)``, never ``organization_for_user`` (or
  the old ``get_scoped_or_404``) called from a view.

An outsider's request then gets the same 404 everywhere (the tenancy tests check the answers themselves).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("portal", "billing", "datasets", "instances")
OTHER_WAYS = {"get_object_or_404", "organization_for_user", "get_scoped_or_404"}


def _view_modules() -> list[Path]:
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or "tests" in path.parts:
                continue
            if path.name in ("views.py", "api.py") or path.name.endswith("_views.py"):
                found.append(path)
    return found


def _org_owned_model_names() -> set[str]:
    """Class names of the models an organization owns: ``Organization`` and every model with a foreign key
    (or one-to-one) path to it, however long."""
    from django.apps import apps

    from portal.models import Organization

    owned: set[type] = {Organization}
    grew = True
    while grew:
        grew = False
        for model in apps.get_models():
            if model in owned:
                continue
            if any(
                (f.many_to_one or f.one_to_one) and f.concrete and f.related_model in owned
                for f in model._meta.get_fields()
            ):
                owned.add(model)
                grew = True
    return {m.__name__ for m in owned}


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def unscoped_lookups(source: str, *, owned: set[str]) -> list[str]:
    """Lines "line: what", one for each lookup in ``source`` that bypasses ``portal.scoping``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "get"
            and isinstance(func.value, ast.Attribute)
            and func.value.attr in ("objects", "_default_manager")
            and isinstance(func.value.value, ast.Name)
            and func.value.value.id in owned
        ):
            found.append(f"{node.lineno}: {func.value.value.id}.{func.value.attr}.get(")
        elif _call_name(node) in OTHER_WAYS:
            found.append(f"{node.lineno}: {_call_name(node)}(")
    return found


def test_view_modules_look_up_organization_objects_only_through_portal_scoping() -> None:
    owned = _org_owned_model_names()
    modules = _view_modules()
    assert len(modules) >= 11  # console views and API views of every app, the marketplace's and webhooks' too
    offenders = {
        str(path.relative_to(ROOT)): hits
        for path in modules
        if (hits := unscoped_lookups(path.read_text(encoding="utf-8"), owned=owned))
    }
    assert offenders == {}


def test_the_organization_owned_models_include_each_apps_tenants_objects() -> None:
    owned = _org_owned_model_names()
    assert {"Organization", "Membership", "Instance", "TrainingJob", "Upload", "App", "AppCall", "Wallet"} <= owned
    assert {"User", "GpuType"}.isdisjoint(owned)


def test_the_check_sees_each_way_around_the_scoped_lookup() -> None:
    source = (
        "def view(request, org, pk):\n"
        "    organization = organization_for_user(user=request.user, slug=org)\n"
        "    job = TrainingJob.objects.get(pk=pk)\n"
        "    app = get_object_or_404(App, pk=pk)\n"
        "    gpu = GpuType.objects.get(pk=pk)\n"  # not owned by an organization: fine
        "    return scoped_get_or_404(Instance, organization=organization, pk=pk)\n"
    )
    assert unscoped_lookups(source, owned={"TrainingJob", "App", "Instance"}) == [
        "2: organization_for_user(",
        "3: TrainingJob.objects.get(",
        "4: get_object_or_404(",
    ]
