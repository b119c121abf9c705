"""App state reasons as codes with parameters (issue 25): ``state_reason_code`` / ``state_reason_params``
beside the English text, and the apps written before them given their code where their text is one
``portal.marketplace.reasons`` recognises (a reason typed by staff stays plain text, shown as typed)."""

from django.db import migrations, models


def _problems(value):
    """The license problems of a stored "cannot be published" reason, one nested code each ("; "-joined)."""
    from portal.marketplace.reasons import APP_REASONS

    text = value if isinstance(value, str) else APP_REASONS.text(value["code"], value["params"], translate=None)
    out = []
    for part in text.split("; "):
        found = APP_REASONS.parse(part)
        out.append({"code": found[0], "params": found[1]} if found else part)
    return out


def state_reason_codes_from_text(apps, schema_editor):
    from portal.marketplace.reasons import APP_REASONS

    App = apps.get_model("marketplace", "App")
    for app in App.objects.filter(state_reason_code="").exclude(state_reason="").only("id", "state_reason"):
        found = APP_REASONS.parse(app.state_reason)
        if found is None:
            continue
        code, params = found
        if code == "license_forbids":
            params = {"p": _problems(params["p"])}
        App.objects.filter(pk=app.pk).update(state_reason_code=code, state_reason_params=params)


class Migration(migrations.Migration):
    dependencies = [
        ("marketplace", "0002_token_prices"),
    ]

    operations = [
        migrations.AddField(
            model_name="app",
            name="state_reason_code",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="app",
            name="state_reason_params",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(state_reason_codes_from_text, migrations.RunPython.noop),
    ]
