"""Celery tasks of the portal app. Celery's autodiscovery imports ``<app>.tasks`` of each installed app,
so the marketplace's tasks (a subpackage of ``portal``) are registered by importing them here."""

from portal.marketplace.tasks import app_version_build

__all__ = ["app_version_build"]
