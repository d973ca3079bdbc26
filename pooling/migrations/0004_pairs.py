"""Pairs become the unit of judging: every (query, document) a pool held becomes one Pair, and
each pool item points at its pair. The judgments move to the pairs in judging's 0004; the pool
items' own query and document columns go in 0005, once nothing reads them.

Every statement is plain SQL over whole tables (PostgreSQL and SQLite alike): a project with a
million pooled pairs migrates in seconds, and no row is read into Python.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

PAIRS = """
INSERT INTO pooling_pair (query_id, document_id)
SELECT DISTINCT query_id, document_id FROM pooling_poolitem
"""
ITEM_PAIRS = """
UPDATE pooling_poolitem SET pair_id = (
    SELECT p.id FROM pooling_pair p
    WHERE p.query_id = pooling_poolitem.query_id AND p.document_id = pooling_poolitem.document_id
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0008_document_project_constraint"),
        ("pooling", "0003_bulk_tables_constraints"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Pair",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "document",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="pairs",
                        to="annotation.document",
                    ),
                ),
                (
                    "query",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="pairs",
                        to="annotation.query",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("query", "document"), name="pair_once")
                ],
            },
        ),
        migrations.AddField(
            model_name="pool",
            name="scope",
            field=models.CharField(
                choices=[
                    ("all", "every query of the project"),
                    ("new", "only queries no earlier pool holds"),
                ],
                default="all",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="pool",
            name="created_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="pool",
            name="selected",
            field=models.PositiveIntegerField(default=0, help_text="pairs the pool selects"),
        ),
        migrations.AddField(
            model_name="pool",
            name="added",
            field=models.PositiveIntegerField(default=0, help_text="pairs no earlier pool held"),
        ),
        migrations.AddField(
            model_name="pool",
            name="judged_before",
            field=models.PositiveIntegerField(
                default=0,
                help_text="selected pairs somebody had graded when the pool was built",
            ),
        ),
        migrations.AddField(
            model_name="pool",
            name="to_judge",
            field=models.PositiveIntegerField(default=0, help_text="selected pairs made work"),
        ),
        migrations.AddField(
            model_name="poolitem",
            name="pair",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="pool_items",
                to="pooling.pair",
            ),
        ),
        migrations.RunSQL(PAIRS, migrations.RunSQL.noop),
        migrations.RunSQL(ITEM_PAIRS, migrations.RunSQL.noop),
    ]
