"""Production settings: secrets and hosts only from the environment; ``check --deploy`` is clean.

Required: ``DJANGO_SECRET_KEY``, ``DJANGO_ALLOWED_HOSTS``, ``DATABASE_URL`` (PostgreSQL),
``CELERY_BROKER_URL`` (Redis). Served by gunicorn behind a TLS-terminating proxy that sets
``X-Forwarded-Proto``; static files by WhiteNoise.
"""

from portal.env import env_bool, env_int, env_str
from portal.settings.base import *  # noqa: F403

DEBUG = False
SECRET_KEY = env_str("DJANGO_SECRET_KEY", required=True)
if len(SECRET_KEY) < 50 or SECRET_KEY.startswith("dev-insecure"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be a random string of at least 50 characters")
env_str("DATABASE_URL", required=True)
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", required=True)
CELERY_BROKER_TRANSPORT_OPTIONS = {}
CELERY_BROKER_TRANSPORT = None  # the URL names the transport (Redis or RabbitMQ)

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = False  # the collected, hashed files only (collectstatic)
