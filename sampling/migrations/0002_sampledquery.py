# Which sample a query came from was a column of annotation's query table (annotation would
# otherwise depend on sampling); it becomes sampling's SampledQuery, row for row.
import django.db.models.deletion
from django.db import migrations, models


def copy_links(apps, schema_editor):
    schema_editor.execute(
        "INSERT INTO sampling_sampledquery (query_id, sample_id) "
        "SELECT id, sample_id FROM annotation_query WHERE sample_id IS NOT NULL"
    )


def copy_links_back(apps, schema_editor):
    schema_editor.execute(
        "UPDATE annotation_query SET sample_id = (SELECT s.sample_id FROM sampling_sampledquery s "
        "WHERE s.query_id = annotation_query.id) "
        "WHERE id IN (SELECT query_id FROM sampling_sampledquery)"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0007_move_sampling_models"),
        ("sampling", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="SampledQuery",
            fields=[
                (
                    "query",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="sampled",
                        serialize=False,
                        to="annotation.query",
                    ),
                ),
                (
                    "sample",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sampled",
                        to="sampling.querysample",
                    ),
                ),
            ],
        ),
        migrations.RunPython(copy_links, copy_links_back),
    ]
