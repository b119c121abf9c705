"""The marketplace's move to its own app label (``portal`` 0008 + ``marketplace`` 0001) changes Django's state
only: a fresh database migrates from zero, and a database that was at ``portal`` 0007 with marketplace rows keeps
every row, its content types (and so staff permissions) and its audit trail under the new label.

Each case migrates its own SQLite file in a ``manage.py`` subprocess (the test database is already migrated).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a few manage.py runs of their own

ROOT = Path(__file__).resolve().parents[2]


def _manage(db: Path, *args: str, stdin: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings.test", SQLITE_PATH=str(db))
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


SEED_AT_PORTAL_0007 = """
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.loader import MigrationLoader
# The models as they were at portal 0007 (today's classes have columns later migrations add).
old = MigrationLoader(connection).project_state(("portal", "0007_membership_role_billing")).apps
App, AppCall, AppPublishRequest, AppVersion, AuditEvent, Organization = (
    old.get_model("portal", name)
    for name in ("App", "AppCall", "AppPublishRequest", "AppVersion", "AuditEvent", "Organization")
)
org = Organization.objects.create(name="alice", slug="alice", personal=True)
app = App.objects.create(publisher=org, name="Echo", slug="echo", category="general", price_per_call_micros=1500)
version = AppVersion.objects.create(app=app, number=1, kind="echo", active=True)
AppCall.objects.create(app=app, version=version, caller=org, idempotency_key="k1", request_sha256="0" * 64,
                       price_micros=1500, status="succeeded")
AppPublishRequest.objects.create(organization=org, idempotency_key="pub-1", request_sha256="1" * 64, version=version)
# What the code before the move left: content types and permissions under "portal" only (this run's
# post_migrate also made "marketplace" ones, which the old code never had).
ContentType.objects.filter(app_label="marketplace").delete()
for model in ("app", "appversion", "appcall", "apppublishrequest"):
    ct, _ = ContentType.objects.get_or_create(app_label="portal", model=model)
    Permission.objects.get_or_create(content_type=ct, codename=f"change_{model}", defaults={"name": model})
AuditEvent.objects.create(action="marketplace.app_created", organization=org, object_type="portal.app",
                          object_id=str(app.pk))
"""

REPORT = """
from django.contrib.auth.models import Permission
from portal.marketplace.models import App, AppCall, AppPublishRequest, AppVersion
from portal.models import AuditEvent
call = AppCall.objects.get()
print(App.objects.count(), AppVersion.objects.count(), AppCall.objects.count(), AppPublishRequest.objects.count())
print(call.app.slug, call.version.number, call.caller.slug, AppPublishRequest.objects.get().version.number)
print(sorted(Permission.objects.filter(codename="change_app").values_list("content_type__app_label", flat=True)))
print(list(AuditEvent.objects.values_list("object_type", flat=True)))
"""


def test_a_fresh_database_migrates_from_zero_to_the_models(tmp_path: Path) -> None:
    db = tmp_path / "fresh.sqlite3"
    _manage(db, "migrate", "--no-input", "-v", "0")
    shown = _manage(db, "showmigrations", "portal", "marketplace")
    assert "[X] 0008_marketplace_moves_to_its_own_app" in shown and "[X] 0001_initial" in shown
    assert "No changes detected" in _manage(db, "makemigrations", "--check", "--dry-run")


def test_a_database_at_portal_0007_keeps_its_marketplace_rows(tmp_path: Path) -> None:
    db = tmp_path / "existing.sqlite3"
    _manage(db, "migrate", "portal", "0007", "--no-input", "-v", "0")
    _manage(db, "shell", stdin=SEED_AT_PORTAL_0007)

    _manage(db, "migrate", "--no-input", "-v", "0")

    assert _manage(db, "shell", stdin=REPORT).splitlines()[-4:] == [
        "1 1 1 1",
        "echo 1 alice 1",
        "['marketplace']",  # the content type moved, its permission with it
        "['marketplace.app']",
    ]
