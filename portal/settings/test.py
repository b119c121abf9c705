"""Test settings: the base settings with fast hashing, in-memory e-mail and eager-free Celery.

``DATABASE_URL`` still selects PostgreSQL (CI runs the suite on both).
"""

from portal.settings.base import *  # noqa: F403

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
