"""gpu-portal project package: settings, URLs, the Celery app, accounts, organizations and API tokens."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
