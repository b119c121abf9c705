from django.apps import AppConfig


class MarketplaceConfig(AppConfig):
    """The AI app marketplace, its own Django app (label ``marketplace``) on the top floor of ``portal/``.

    Its models keep the tables they were created with under the ``portal`` label (``portal_app``,
    ``portal_appversion``, ``portal_appcall``, ``portal_apppublishrequest``): the move to this label changed
    only Django's migration state (``portal`` 0008 and ``marketplace`` 0001), no row moved.
    """

    name = "portal.marketplace"
    label = "marketplace"
    verbose_name = "AI app marketplace"
