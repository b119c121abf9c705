"""Simplified Chinese number formats: Django's, with amounts grouped by thousands ("1,738,915.20"), as Chinese
banks and invoices print money (Django's own zh_Hans formats use no separator)."""

from django.conf.locale.zh_Hans.formats import *  # noqa: F403 - Django's dates and input formats stay

THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
