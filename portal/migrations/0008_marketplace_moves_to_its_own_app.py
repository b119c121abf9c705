"""The AI app marketplace's models leave the ``portal`` label for their own app (``marketplace``).

State only: the tables ``portal_app``, ``portal_appversion``, ``portal_appcall`` and ``portal_apppublishrequest``
stay where they are, with their rows; ``marketplace`` 0001 (which runs after this) adds the same models to its
state with ``db_table`` set to these names, relabels their content types and the audit trail's object types.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('portal', '0007_membership_role_billing'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                # Referencing models first, so no state ever holds a foreign key to a removed model.
                migrations.DeleteModel(name='AppPublishRequest'),
                migrations.DeleteModel(name='AppCall'),
                migrations.DeleteModel(name='AppVersion'),
                migrations.DeleteModel(name='App'),
            ],
            database_operations=[],
        ),
    ]
