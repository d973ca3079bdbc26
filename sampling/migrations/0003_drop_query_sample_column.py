# The old column goes once its links are copied (sampling/0002), in a migration of its own so
# that PostgreSQL alters the table in a transaction without pending constraint checks.
from django.db import migrations, models


def drop_column(apps, schema_editor):
    query = apps.get_model("annotation", "Query")
    if schema_editor.connection.vendor == "sqlite":
        # SQLite cannot drop a column that holds a foreign key: rebuild the table from the
        # model, which no longer has it (what Django does for any such change on SQLite).
        schema_editor._remake_table(query)
        return
    table = schema_editor.quote_name(query._meta.db_table)
    schema_editor.execute(
        f"ALTER TABLE {table} DROP COLUMN {schema_editor.quote_name('sample_id')}"
    )


def restore_column(apps, schema_editor):
    query = apps.get_model("annotation", "Query")
    field = models.ForeignKey(
        apps.get_model("sampling", "QuerySample"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    field.set_attributes_from_name("sample")
    field.model = query
    schema_editor.add_field(query, field)


class Migration(migrations.Migration):
    dependencies = [
        ("sampling", "0002_sampledquery"),
    ]

    operations = [migrations.RunPython(drop_column, restore_column)]
