"""The marketplace's models, taken over from the ``portal`` label without moving a row.

``portal`` 0008 removed App, AppVersion, AppCall and AppPublishRequest from ``portal``'s state; this adds them to
``marketplace``'s state over the tables they already have (``db_table``: ``portal_app`` …, indexes and
constraints keep their names), so a fresh database and one that was at ``portal`` 0007 both end with the same
schema and an existing database keeps its rows. Two data steps follow the state, both reversible:

* content types ``portal.app`` … become ``marketplace.app`` … (when the new one does not exist yet), so staff
  permissions and admin log entries stay attached to their model;
* audit events written with ``object_type`` ``portal.app`` … read ``marketplace.app`` …, the label the audit
  writer (``obj._meta.label_lower``) uses from now on.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


MODELS = ("app", "appversion", "appcall", "apppublishrequest")


def _relabel(apps, schema_editor, *, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    AuditEvent = apps.get_model("portal", "AuditEvent")
    db = schema_editor.connection.alias
    for model in MODELS:
        if not ContentType.objects.using(db).filter(app_label=new, model=model).exists():
            ContentType.objects.using(db).filter(app_label=old, model=model).update(app_label=new)
        AuditEvent.objects.using(db).filter(object_type=f"{old}.{model}").update(object_type=f"{new}.{model}")


def labels_forward(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, old="portal", new="marketplace")


def labels_backward(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, old="marketplace", new="portal")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('portal', '0008_marketplace_moves_to_its_own_app'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='App',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, verbose_name='name')),
                        ('slug', models.SlugField(max_length=80, unique=True)),
                        ('category', models.CharField(choices=[('legal', 'Legal'), ('finance', 'Finance'), ('medical', 'Medical'), ('general', 'General')], max_length=20, verbose_name='category')),
                        ('description', models.TextField(blank=True, verbose_name='description')),
                        ('input_schema', models.JSONField(default=dict)),
                        ('output_schema', models.JSONField(default=dict)),
                        ('example_request', models.JSONField(blank=True, default=dict)),
                        ('example_response', models.JSONField(blank=True, default=dict)),
                        ('price_per_call_micros', models.BigIntegerField(default=0)),
                        ('price_per_1k_tokens_micros', models.BigIntegerField(default=0)),
                        ('publisher_share_bps', models.PositiveIntegerField(default=7000)),
                        ('visibility', models.CharField(choices=[('private', 'Private to the organization'), ('public', 'Public in the marketplace')], default='private', max_length=10)),
                        ('state', models.CharField(choices=[('draft', 'Draft'), ('in_review', 'In review'), ('published', 'Published'), ('suspended', 'Suspended')], default='draft', max_length=12)),
                        ('state_reason', models.CharField(blank=True, max_length=300)),
                        ('attributions', models.JSONField(blank=True, default=list, help_text='attribution texts of training datasets')),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('publisher', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='apps', to='portal.organization')),
                    ],
                    options={
                        'db_table': 'portal_app',
                        'ordering': ['name', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='AppVersion',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('number', models.PositiveIntegerField()),
                        ('kind', models.CharField(choices=[('checkpoint', 'Model from a training checkpoint'), ('external', 'External HTTPS endpoint'), ('echo', 'Echo (returns the input)')], max_length=12)),
                        ('endpoint_url', models.URLField(blank=True, max_length=500)),
                        ('hmac_secret', models.CharField(blank=True, max_length=100)),
                        ('checkpoint_ref', models.CharField(blank=True, help_text='instances.checkpoint:<id>', max_length=100)),
                        ('artifact_path', models.CharField(blank=True, max_length=500)),
                        ('deployment', models.JSONField(blank=True, default=dict)),
                        ('lineage', models.JSONField(blank=True, default=list)),
                        ('status', models.CharField(choices=[('building', 'Building'), ('ready', 'Ready'), ('failed', 'Failed')], default='ready', max_length=10)),
                        ('progress', models.PositiveSmallIntegerField(default=100)),
                        ('error', models.TextField(blank=True)),
                        ('active', models.BooleanField(default=False)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('app', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='marketplace.app')),
                    ],
                    options={
                        'db_table': 'portal_appversion',
                        'ordering': ['-number'],
                    },
                ),
                migrations.CreateModel(
                    name='AppPublishRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('idempotency_key', models.CharField(max_length=200)),
                        ('request_sha256', models.CharField(max_length=64)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='app_publish_requests', to='portal.organization')),
                        ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='marketplace.appversion')),
                    ],
                    options={
                        'db_table': 'portal_apppublishrequest',
                    },
                ),
                migrations.CreateModel(
                    name='AppCall',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('idempotency_key', models.CharField(blank=True, max_length=200, null=True)),
                        ('request_sha256', models.CharField(max_length=64)),
                        ('status', models.CharField(choices=[('reserved', 'Reserved'), ('succeeded', 'Succeeded'), ('failed', 'Failed')], default='reserved', max_length=10)),
                        ('price_micros', models.BigIntegerField(help_text='held while reserved; what was charged once succeeded')),
                        ('publisher_share_micros', models.BigIntegerField(default=0)),
                        ('billed_tokens', models.PositiveIntegerField(blank=True, help_text="tokens charged at the app's price per 1,000 tokens", null=True)),
                        ('attempts', models.PositiveIntegerField(default=1)),
                        ('latency_ms', models.PositiveIntegerField(blank=True, null=True)),
                        ('error_code', models.CharField(blank=True, max_length=40)),
                        ('error', models.TextField(blank=True)),
                        ('response', models.JSONField(blank=True, null=True)),
                        ('ledger_transaction_id', models.BigIntegerField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ('reserved_at', models.DateTimeField(blank=True, help_text='when the last attempt was reserved', null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('app', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='calls', to='marketplace.app')),
                        ('caller', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='app_calls', to='portal.organization')),
                        ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('version', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='calls', to='marketplace.appversion')),
                    ],
                    options={
                        'db_table': 'portal_appcall',
                        'ordering': ['-id'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='appversion',
                    constraint=models.UniqueConstraint(fields=('app', 'number'), name='uniq_app_version'),
                ),
                migrations.AddConstraint(
                    model_name='appversion',
                    constraint=models.UniqueConstraint(condition=models.Q(('active', True)), fields=('app',), name='one_active_version'),
                ),
                migrations.AddConstraint(
                    model_name='apppublishrequest',
                    constraint=models.UniqueConstraint(fields=('organization', 'idempotency_key'), name='uniq_publish_request_key'),
                ),
                migrations.AddIndex(
                    model_name='appcall',
                    index=models.Index(fields=['app', 'created_at'], name='portal_appc_app_id_f7351e_idx'),
                ),
                migrations.AddIndex(
                    model_name='appcall',
                    index=models.Index(fields=['caller', 'status'], name='portal_appc_caller__6cf8d8_idx'),
                ),
                migrations.AddConstraint(
                    model_name='appcall',
                    constraint=models.UniqueConstraint(fields=('caller', 'app', 'idempotency_key'), name='uniq_call_key'),
                ),
            ],
            database_operations=[],  # the tables exist (portal 0002-0006)
        ),
        migrations.RunPython(labels_forward, labels_backward),
    ]
