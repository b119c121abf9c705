"""``manage.py seed_catalog``: default price book (and, where installed, the GPU catalog)."""

from typing import Any

from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand

from billing.pricing import seed_price_book, seed_tier_discounts


class Command(BaseCommand):
    help = "Insert default price-book rows (and GPU types / images) that do not exist yet."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"price book: {seed_price_book()} rows added")
        self.stdout.write(f"tier discounts: {seed_tier_discounts()} rows added")
        if "seed_gpu_catalog" in get_commands():
            call_command("seed_gpu_catalog")
