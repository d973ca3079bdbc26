"""Pool items keep only their pair: the query and document columns go (judging 0004 has moved
the judgments to the pairs), and a pair is held once per pool. The pools' counts are filled:
until now every item of a pool was work, and a pair counts as added by the first pool (lowest
id) that held it."""

import django.db.models.deletion
from django.db import migrations, models

ITEM_SIDES = """
UPDATE pooling_poolitem SET
    query_id = (SELECT p.query_id FROM pooling_pair p WHERE p.id = pooling_poolitem.pair_id),
    document_id = (SELECT p.document_id FROM pooling_pair p WHERE p.id = pooling_poolitem.pair_id)
"""
POOL_COUNTS = """
UPDATE pooling_pool SET
    selected = (SELECT count(*) FROM pooling_poolitem i WHERE i.pool_id = pooling_pool.id),
    to_judge = (SELECT count(*) FROM pooling_poolitem i WHERE i.pool_id = pooling_pool.id),
    added = (
        SELECT count(*) FROM pooling_poolitem i WHERE i.pool_id = pooling_pool.id
        AND NOT EXISTS (
            SELECT 1 FROM pooling_poolitem e WHERE e.pair_id = i.pair_id AND e.pool_id < i.pool_id
        )
    )
"""


class Migration(migrations.Migration):
    dependencies = [
        ("pooling", "0004_pairs"),
        ("judging", "0004_judgments_belong_to_pairs"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="poolitem", name="pool_pair_once"),
        migrations.AlterField(
            model_name="poolitem",
            name="query",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="pool_items",
                to="annotation.query",
            ),
        ),
        migrations.AlterField(
            model_name="poolitem",
            name="document",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="pool_items",
                to="annotation.document",
            ),
        ),
        migrations.RunSQL(migrations.RunSQL.noop, ITEM_SIDES),
        migrations.RemoveField(model_name="poolitem", name="query"),
        migrations.RemoveField(model_name="poolitem", name="document"),
        migrations.AlterField(
            model_name="poolitem",
            name="pair",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="pool_items",
                to="pooling.pair",
            ),
        ),
        migrations.AddConstraint(
            model_name="poolitem",
            constraint=models.UniqueConstraint(fields=("pair", "pool"), name="pool_pair_once"),
        ),
        migrations.RunSQL(POOL_COUNTS, migrations.RunSQL.noop),
    ]
