# Every search log gets its ingest job (jobs.Job), which from now on holds its state; the
# log's own status columns go in 0005, in a migration of their own so that PostgreSQL alters
# the table without pending constraint checks.
import django.db.models.deletion
from django.db import migrations, models

HANDLER = "sampling.tasks.log_ingest_job"


def create_jobs(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    QueryLog = apps.get_model("sampling", "QueryLog")
    for log in QueryLog.objects.filter(job__isnull=True).iterator():
        finished = log.status in ("done", "failed")
        job = Job.objects.create(
            project_id=log.project_id,
            kind="log_ingest",
            handler=HANDLER,
            state=log.status,
            progress=log.progress,
            message=log.message,
            error=log.error,
            retryable=False,
            attempts=1 if log.status != "queued" else 0,
            heartbeat_at=log.created_at,
            params={"path": log.upload} if log.upload else {},
            files=[log.upload] if log.upload else [],
            created_by_id=log.uploaded_by_id,
        )
        Job.objects.filter(pk=job.pk).update(
            created_at=log.created_at, finished_at=log.created_at if finished else None
        )
        QueryLog.objects.filter(pk=log.pk).update(job=job)


def restore_states(apps, schema_editor):
    QueryLog = apps.get_model("sampling", "QueryLog")
    for log in QueryLog.objects.select_related("job").exclude(job=None).iterator():
        job = log.job
        QueryLog.objects.filter(pk=log.pk).update(
            status=job.state if job.state != "discarded" else "failed",
            progress=job.progress,
            message=job.message,
            error=job.error,
            upload=(job.files or [""])[0],
        )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0001_initial"),
        ("sampling", "0003_drop_query_sample_column"),
    ]

    operations = [
        migrations.AddField(
            model_name="querylog",
            name="job",
            field=models.OneToOneField(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="query_log",
                to="jobs.job",
            ),
        ),
        migrations.RunPython(create_jobs, restore_states),
    ]
