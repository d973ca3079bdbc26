from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from jobs.services import reap


class Command(BaseCommand):
    help = (
        "End or restart background jobs nobody runs any more: running jobs whose heartbeat "
        "stopped are queued again (or failed once their attempts are used up), queued jobs "
        "never picked up are published again, retryable failures left for JOB_KEEP_FAILED_DAYS are "
        "discarded, files of jobs that ended for good are deleted. "
        "Celery beat runs the same every JOB_REAP_INTERVAL seconds."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        counts = reap().counts()
        self.stdout.write(", ".join(f"{name} {count}" for name, count in counts.items()))
