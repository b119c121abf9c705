"""Ledger, wallets and credit grants (and later: price book, metering, Stripe, statements)."""
