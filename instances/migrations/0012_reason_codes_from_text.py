"""Reasons written before their codes existed (issue 25): ``Instance.status_reason``,
``InstanceTransition.reason`` and ``JobAttempt.message`` rows with an empty code get the code and params of
the ``instances.reasons.REASON_TEXTS`` template their English text matches whole, so they read in the reader's
language; a text no template matches stays without a code and is shown as stored. Only the code and params
columns are written."""

from django.db import migrations

BATCH = 1000
# the parameters that hold a reason themselves (instances.reconcile, instances.k8s_reasons, instances.scheduler)
NESTED = {"node_lost": ("msg",), "k8s_evicted": ("why",), "pending_timeout": ("why",),
          "sched_not_multiple": ("why", "hint")}  # fmt: skip
ROWS = (  # model, text column, code column, params column
    ("Instance", "status_reason", "status_reason_code", "status_reason_params"),
    ("InstanceTransition", "reason", "reason_code", "reason_params"),
    ("JobAttempt", "message", "message_code", "message_params"),
)


def reason_codes_from_text(apps, schema_editor):
    from instances.reasons import REASON_TEXTS
    from portal.lib.coded_text import TextCodes

    reasons = TextCodes(REASON_TEXTS, nested=NESTED)
    for model_name, text, code, params in ROWS:
        model = apps.get_model("instances", model_name)
        todo = model.objects.filter(**{code: ""}).exclude(**{text: ""}).only("id", text)
        batch = []
        for row in todo.iterator(chunk_size=BATCH):
            found = reasons.parse(getattr(row, text))
            if found is None:
                continue
            setattr(row, code, found[0])
            setattr(row, params, found[1])
            batch.append(row)
            if len(batch) >= BATCH:
                model.objects.bulk_update(batch, [code, params])
                batch = []
        if batch:
            model.objects.bulk_update(batch, [code, params])


class Migration(migrations.Migration):
    dependencies = [
        ("instances", "0011_elastic_resume_gpu_counts"),
    ]

    operations = [migrations.RunPython(reason_codes_from_text, migrations.RunPython.noop)]
