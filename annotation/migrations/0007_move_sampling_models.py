# Search logs, their statistics and samples move to the sampling app (sampling/0001-0003). Only
# annotation's idea of its models changes here: the tables stay as they are until sampling's
# migrations take them over, so no row is lost or copied twice.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0006_query_log_definition"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                # The column stays until sampling/0003 has copied it into SampledQuery.
                migrations.RemoveField(model_name="query", name="sample"),
                migrations.DeleteModel(name="QuerySample"),
                migrations.DeleteModel(name="LogQueryStat"),
                migrations.DeleteModel(name="SamplingScheme"),
                migrations.DeleteModel(name="QueryLog"),
            ],
            database_operations=[],
        ),
    ]
