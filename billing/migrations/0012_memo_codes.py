"""Ledger memos as codes with parameters (issue 25): ``memo_code`` / ``memo_params`` beside the English text,
and the lines written before them given their code where their text is one ``billing.memos`` recognises.

Only the two new columns are written: no amount, key, kind or text of a line changes (the ledger is
append-only); a memo typed by a person stays without a code and is shown as typed."""

from django.db import migrations, models

BATCH = 1000


def memo_codes_from_text(apps, schema_editor):
    from billing.memos import MEMOS

    LedgerTransaction = apps.get_model("billing", "LedgerTransaction")
    todo = LedgerTransaction.objects.filter(memo_code="").exclude(memo="").only("id", "memo")
    batch = []
    for txn in todo.iterator(chunk_size=BATCH):
        found = MEMOS.parse(txn.memo)
        if found is None:
            continue
        txn.memo_code, txn.memo_params = found
        batch.append(txn)
        if len(batch) >= BATCH:
            LedgerTransaction.objects.bulk_update(batch, ["memo_code", "memo_params"])
            batch = []
    if batch:
        LedgerTransaction.objects.bulk_update(batch, ["memo_code", "memo_params"])


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0011_staff_grant_label"),
    ]

    operations = [
        migrations.AddField(
            model_name="ledgertransaction",
            name="memo_code",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="ledgertransaction",
            name="memo_params",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(memo_codes_from_text, migrations.RunPython.noop),
    ]
