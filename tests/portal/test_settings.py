"""Production settings pass ``check --deploy``; settings helpers fail loudly on bad values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_decimal, env_int, env_networks

ROOT = Path(__file__).resolve().parents[2]
PROD_ENV = {
    "DJANGO_SETTINGS_MODULE": "portal.settings.production",
    "DJANGO_SECRET_KEY": "k" * 20 + "-production-like-secret-" + "z9" * 20,
    "DJANGO_ALLOWED_HOSTS": "portal.example.com",
    "DATABASE_URL": "postgres://portal@127.0.0.1:5432/portal",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_production_settings_pass_check_deploy_with_no_warnings():
    result = _run(["check", "--deploy", "--fail-level", "WARNING"], PROD_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_settings_refuse_a_missing_or_weak_secret():
    env = {**PROD_ENV, "DJANGO_SECRET_KEY": ""}
    result = _run(["check"], env)
    assert result.returncode != 0 and "DJANGO_SECRET_KEY is required" in result.stderr
    result = _run(["check"], {**PROD_ENV, "DJANGO_SECRET_KEY": "short"})
    assert result.returncode != 0 and "at least 50 characters" in result.stderr


@pytest.mark.parametrize(
    ("func", "value", "message"),
    [
        (lambda: env_bool("X_TEST", False), "maybe", "X_TEST='maybe' is not a boolean"),
        (lambda: env_int("X_TEST", 1), "ten", "X_TEST='ten' is not an integer"),
        (lambda: env_int("X_TEST", 1, minimum=1), "0", "X_TEST=0 must be >= 1"),
        (lambda: env_decimal("X_TEST", "1"), "1,5", "X_TEST='1,5' is not a decimal number"),
        (lambda: env_decimal("X_TEST", "1"), "-2", "must be a finite, non-negative number"),
        (lambda: env_networks("X_TEST"), "10.0.0.0/8,10.300.0.0/16", "X_TEST: '10.300.0.0/16' is not a network"),
        (lambda: env_networks("X_TEST"), "10.0.0.1/8", "X_TEST: '10.0.0.1/8' is not a network (10.0.0.1/8 has host"),
    ],
)
def test_env_helpers_fail_loudly(monkeypatch, func, value, message):
    monkeypatch.setenv("X_TEST", value)
    with pytest.raises(ImproperlyConfigured, match=message.replace("(", r"\(")):
        func()


def test_allowed_networks_are_read_in_canonical_form(monkeypatch):
    monkeypatch.setenv("X_TEST", " 10.20.0.0/16 , FD12:3456::/48,,192.0.2.7")
    assert env_networks("X_TEST") == ["10.20.0.0/16", "fd12:3456::/48", "192.0.2.7/32"]


def test_a_bad_trial_credit_stops_the_process_at_start():
    result = _run(["check"], {"TRIAL_CREDIT": "ten"})
    assert result.returncode != 0 and "TRIAL_CREDIT='ten' is not a decimal number" in result.stderr
