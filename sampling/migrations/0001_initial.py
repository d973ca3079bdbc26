# The models that were annotation's (annotation/0003, 0006) become sampling's: the state is
# created over the existing tables, which are then renamed; content types follow, so that
# permissions and admin history keep pointing at the same rows.
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("samplingscheme", "querylog", "logquerystat", "querysample")


def move_content_types(apps, schema_editor, source="annotation", target="sampling"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label=source, model__in=MOVED
    ).update(app_label=target)


def return_content_types(apps, schema_editor):
    move_content_types(apps, schema_editor, source="sampling", target="annotation")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("annotation", "0007_move_sampling_models"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="SamplingScheme",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("definition", models.JSONField()),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "project",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="sampling",
                                to="annotation.project",
                            ),
                        ),
                    ],
                    options={"db_table": "annotation_samplingscheme"},
                ),
                migrations.CreateModel(
                    name="QueryLog",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=255)),
                        (
                            "upload",
                            models.CharField(
                                blank=True, help_text="file until ingested", max_length=500
                            ),
                        ),
                        (
                            "columns",
                            models.CharField(
                                blank=True, help_text="field=column, ...", max_length=500
                            ),
                        ),
                        (
                            "definition",
                            models.JSONField(
                                blank=True,
                                help_text="strata definition asked for at upload; only the project's first log uses it",
                                null=True,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("done", "Done"),
                                    ("failed", "Failed"),
                                ],
                                default="queued",
                                max_length=16,
                            ),
                        ),
                        ("progress", models.FloatField(default=0.0)),
                        ("message", models.CharField(blank=True, max_length=500)),
                        ("error", models.TextField(blank=True)),
                        ("report", models.JSONField(blank=True, null=True)),
                        (
                            "strata",
                            models.JSONField(
                                blank=True, help_text="table, chart points, cut ranks", null=True
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="logs",
                                to="annotation.project",
                            ),
                        ),
                        (
                            "uploaded_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"ordering": ["-created_at"], "db_table": "annotation_querylog"},
                ),
                migrations.CreateModel(
                    name="LogQueryStat",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("query", models.TextField()),
                        ("frequency", models.PositiveIntegerField()),
                        ("sessions", models.PositiveIntegerField(null=True)),
                        ("users", models.PositiveIntegerField(null=True)),
                        ("zero_result_rate", models.FloatField(null=True)),
                        ("reformulation_rate", models.FloatField(null=True)),
                        ("abandonment_rate", models.FloatField(null=True)),
                        (
                            "pii",
                            models.CharField(
                                blank=True, help_text="PII kind of a masked query", max_length=32
                            ),
                        ),
                        ("stratum", models.CharField(max_length=16)),
                        (
                            "log",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="stats",
                                to="sampling.querylog",
                            ),
                        ),
                    ],
                    options={"db_table": "annotation_logquerystat"},
                ),
                migrations.CreateModel(
                    name="QuerySample",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("quotas", models.JSONField()),
                        ("seed", models.BigIntegerField()),
                        ("weighted", models.BooleanField(default=False)),
                        ("draws", models.JSONField()),
                        (
                            "drawn",
                            models.JSONField(
                                help_text="the sampled queries as sample_queries prints them"
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("accepted_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "log",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="samples",
                                to="sampling.querylog",
                            ),
                        ),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="samples",
                                to="annotation.project",
                            ),
                        ),
                    ],
                    options={"ordering": ["-created_at"], "db_table": "annotation_querysample"},
                ),
            ],
            database_operations=[],
        ),
        migrations.AlterModelTable(name="samplingscheme", table=None),
        migrations.AlterModelTable(name="querylog", table=None),
        migrations.AlterModelTable(name="logquerystat", table=None),
        migrations.AlterModelTable(name="querysample", table=None),
        migrations.RunPython(move_content_types, return_content_types),
    ]
