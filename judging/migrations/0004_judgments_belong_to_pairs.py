"""Judgments belong to pairs, and work units list the pairs they hold.

Each judgment moves from its pool item to the item's pair (pooling 0004 made them): no row is
added, removed or changed otherwise, so every answer, note, time and protocol stays as it was.
Until now a unit's work was every item of its query in its pool: each unit gets those pairs as
its work items, in the pool's display order.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

JUDGMENT_PAIRS = """
UPDATE judging_judgment SET pair_id = (
    SELECT i.pair_id FROM pooling_poolitem i WHERE i.id = judging_judgment.pool_item_id
)
"""
WORK_ITEMS = """
INSERT INTO judging_workitem (unit_id, pair_id, position)
SELECT u.id, i.pair_id, i.position FROM judging_workunit u
JOIN pooling_poolitem i ON i.pool_id = u.pool_id AND i.query_id = u.query_id
"""
# Back: a judgment returns to an item of its pair, in the pool it was most likely made in (the
# newest pool holding the pair that existed when it was made, else the oldest holding it).
JUDGMENT_ITEMS = """
UPDATE judging_judgment SET pool_item_id = COALESCE(
    (SELECT i.id FROM pooling_poolitem i JOIN pooling_pool p ON p.id = i.pool_id
     WHERE i.pair_id = judging_judgment.pair_id AND p.created_at <= judging_judgment.created_at
     ORDER BY p.created_at DESC, p.id DESC LIMIT 1),
    (SELECT min(i.id) FROM pooling_poolitem i WHERE i.pair_id = judging_judgment.pair_id)
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("judging", "0003_judgment_indexes_per_answer"),
        ("pooling", "0004_pairs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="judgment",
            name="pair",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="judgments",
                to="pooling.pair",
            ),
        ),
        migrations.RunSQL(JUDGMENT_PAIRS, migrations.RunSQL.noop),
        migrations.CreateModel(
            name="WorkItem",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "position",
                    models.PositiveIntegerField(
                        help_text="the pair's position in the pool's order"
                    ),
                ),
                (
                    "pair",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="work_items",
                        to="pooling.pair",
                    ),
                ),
                (
                    "unit",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="items",
                        to="judging.workunit",
                    ),
                ),
            ],
            options={
                "ordering": ["position"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("unit", "position"), name="work_item_position_once"
                    ),
                    models.UniqueConstraint(fields=("unit", "pair"), name="work_item_pair_once"),
                ],
            },
        ),
        migrations.RunSQL(WORK_ITEMS, migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="judgment", name="judgment_latest"),
        migrations.AlterField(
            model_name="judgment",
            name="pool_item",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="judgments",
                to="pooling.poolitem",
            ),
        ),
        migrations.RunSQL(migrations.RunSQL.noop, JUDGMENT_ITEMS),
        migrations.RemoveField(model_name="judgment", name="pool_item"),
        migrations.AlterField(
            model_name="judgment",
            name="pair",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="judgments",
                to="pooling.pair",
            ),
        ),
        migrations.AddIndex(
            model_name="judgment",
            index=models.Index(fields=["user", "pair", "-id"], name="judgment_latest"),
        ),
        migrations.AlterField(
            model_name="claim",
            name="state",
            field=models.CharField(
                choices=[
                    ("active", "working on it"),
                    ("assigned", "assigned by a lead, starts next"),
                    ("done", "finished"),
                    ("released", "released"),
                    ("expired", "expired (idle)"),
                    ("moved", "moved to a newer pool"),
                ],
                default="active",
                max_length=16,
            ),
        ),
    ]
