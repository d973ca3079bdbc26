import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sampling", "0004_log_job")]

    operations = [
        migrations.AlterField(
            model_name="querylog",
            name="job",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="query_log",
                to="jobs.job",
            ),
        ),
        migrations.RemoveField(model_name="querylog", name="status"),
        migrations.RemoveField(model_name="querylog", name="progress"),
        migrations.RemoveField(model_name="querylog", name="message"),
        migrations.RemoveField(model_name="querylog", name="error"),
        migrations.RemoveField(model_name="querylog", name="upload"),
    ]
