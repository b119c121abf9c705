"""An unknown address shows the product's own 404 page (issue 25, item 5: the embedded run showed Django's
technical 404 page): the README's run command (``runportal``) serves its children without DEBUG unless the
developer asks for it, static files are still served, and the page is the product's, in the reader's language.
The API keeps its JSON envelope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Run in a process configured exactly as runportal configures its web server (settings module and environment).
PROBE = """
import json
import django
django.setup()
from django.conf import settings
from django.test import Client
client = Client()
page = client.get("/no-such-page/")
css = client.get("/static/portal/app.css")
api = client.get("/api/v1/no-such-thing")
body = page.content.decode()
print(json.dumps({
    "debug": settings.DEBUG,
    "status": page.status_code,
    "product_page": 'data-testid="not-found"' in body and "Page not found" in body,
    "technical_page": "Using the URLconf defined in" in body,
    "css": css.status_code,
    "api": [api.status_code, api.json()],
}))
"""


def test_the_embedded_runs_settings_answer_an_unknown_address_with_the_products_404_page(tmp_path: Path) -> None:
    from portal.management.commands.runportal import embedded_env

    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_", "PORTAL_"))}
    base.update(DJANGO_SETTINGS_MODULE="portal.settings.base", PORTAL_DATA_DIR=str(tmp_path))
    env = embedded_env(base, "127.0.0.1:8000")
    assert (env["DJANGO_DEBUG"], env["PORTAL_SITE_URL"]) == ("false", "http://127.0.0.1:8000")
    assert embedded_env({"DJANGO_DEBUG": "true"}, "h:1")["DJANGO_DEBUG"] == "true"  # a developer's choice stays
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "debug": False,
        "status": 404,
        "product_page": True,
        "technical_page": False,
        "css": 200,  # static files are served without DEBUG (WhiteNoise from the apps' folders)
        "api": [404, {"error": {"code": "not_found", "message": "Not found.", "details": None}}],
    }


def test_the_404_page_is_the_products_in_the_readers_language_with_its_navigation(client: Any, alice: Any) -> None:
    org = alice.organizations.get()
    client.force_login(alice)
    response = client.get(f"/o/{org.slug}/no-such-page/")
    assert response.status_code == 404
    assert [t.name for t in response.templates][:1] == ["404.html"]
    page = response.content.decode()
    assert '<h1 data-testid="not-found">Page not found</h1>' in page
    assert f'href="/o/{org.slug}/instances/"' in page  # the console's navigation, not a bare error page
    client.cookies["django_language"] = "zh-hans"
    page = client.get("/no-such-page/").content.decode()
    assert '<h1 data-testid="not-found">页面不存在</h1>' in page
