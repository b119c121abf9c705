"""Test settings: the base settings with fast hashing, in-memory e-mail and eager-free Celery.

``DATABASE_URL`` still selects PostgreSQL (CI runs the suite on both).

Each test process gets a data folder of its own, a new temporary folder removed when that process exits: the
suite runs in parallel worker processes (pytest-xdist, ``PYTEST_XDIST_WORKER``) whose databases repeat the same
ids, so two workers writing ``<DATA_DIR>/workspaces/1`` or listing ``<DATA_DIR>/uploads`` must not meet. A process
a test starts inherits the folder (the variables below name it and its owner), unless it is given its own
``PORTAL_DATA_DIR`` under another settings module.
"""

import atexit
import os
import shutil
import tempfile

_owner = os.environ.get("PYTEST_XDIST_WORKER", "main")
if os.environ.get("PORTAL_TEST_DATA_DIR_OWNER") != _owner:  # not inherited from a test process of this worker
    os.environ["PORTAL_DATA_DIR"] = tempfile.mkdtemp(prefix=f"gpu-portal-test-{_owner}-")
    os.environ["PORTAL_TEST_DATA_DIR_OWNER"] = _owner
    atexit.register(shutil.rmtree, os.environ["PORTAL_DATA_DIR"], ignore_errors=True)

from portal.settings.base import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only; never in production
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://"
CELERY_BROKER_TRANSPORT_OPTIONS = {}
CELERY_BROKER_TRANSPORT = None  # the URL names the transport
DEBUG = False
# The suite makes thousands of unauthenticated requests from one address; the anonymous throttle's own test
# lowers this rate.
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon"] = "1000000/min"  # type: ignore[index]  # noqa: F405
# A SQLite file (a test's own manage.py runs, SQLITE_PATH) is written without waiting for the disk: a test never
# survives a power cut, and synchronous=FULL made every migration of a from-zero migrate wait for an fsync.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF"  # noqa: F405
