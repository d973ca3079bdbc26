"""Fault drill: faults during a log ingest and during a pool build, on a real worker.

    DATABASE_URL=postgres://user@host/scratch REDIS_URL=redis://127.0.0.1:6379/5 \\
        python bench/fault_drill.py [--lines 2000000]

Migrates the given (scratch) database, starts its own Celery worker (prefork, one child, with
an embedded beat running the reaper every second, small job timeouts), and for each of
{log ingest, pool build} and each fault — the worker's child killed, the whole worker killed
and started again, the job's database connections terminated, the broker unreachable at
publish — starts a job, lands the fault once the job runs, waits past the reaper interval,
then counts: jobs not in a final state (target 0), statistic rows or pools lost or
duplicated (0), files left behind (0). "landed" says whether the job was still running when
the fault hit (a fast machine can finish a job first).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FAST = {
    "JOB_HEARTBEAT_INTERVAL": "1",
    "JOB_HEARTBEAT_TIMEOUT": "3",
    "JOB_REAP_INTERVAL": "1",
    "JOB_QUEUED_TIMEOUT": "5",
    "JOB_RETRY_BACKOFF": "1",
    "JOB_TIME_LIMIT": "300",
}
DISTINCT = 20_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000, help="lines of the generated log")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL to a scratch PostgreSQL database")
    media = Path(tempfile.mkdtemp(prefix="assay-drill-"))
    os.environ.update(FAST, MEDIA_ROOT=str(media), SECRET_KEY="fault-drill")
    os.environ["CELERY_BROKER_URL"] = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/5")
    os.environ["DJANGO_SETTINGS_MODULE"] = "assay.settings.base"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    drill = Drill(media, args.lines)
    try:
        drill.run()
    finally:
        drill.worker_stop()


class Drill:
    def __init__(self, media: Path, lines: int) -> None:
        from annotation.services import project_create
        from assay.celery import app

        self.media, self.lines = media, lines
        self.process: subprocess.Popen[bytes] | None = None
        app.connection_for_write().default_channel.client.flushdb()
        self.project = project_create(slug=f"drill-{os.getpid()}", name="Fault drill")
        self.log = media / "source.csv"
        with open(self.log, "w") as out:
            out.write("query,session_id\n")
            out.writelines(f"query number {i % DISTINCT},{i // 3}\n" for i in range(lines))
        self.runs = self._runs()
        self.rows: list[tuple[str, ...]] = []

    def _runs(self) -> list[int]:
        from formats.trec import RunRow
        from pooling.services import run_create

        queries = [f"q{q}" for q in range(400)]
        for qid in queries:
            self.project.queries.create(qid=qid, text=f"question {qid}")
        self.project.documents.bulk_create(
            self.project.documents.model(project=self.project, docid=f"d{d}", title="", text="t")
            for d in range(3000)
        )
        runs = []
        for r in range(4):
            ranked = {q: [RunRow(q, f"d{(d * (r + 1) + i) % 3000}", d + 1, 1.0 / (d + 1), f"r{r}")
                          for d in range(200)] for i, q in enumerate(queries)}  # fmt: skip
            runs.append(run_create(project=self.project, name=f"r{r}", ranked=ranked).pk)
        return runs

    # -- the worker ---------------------------------------------------------------------------

    def worker_start(self) -> None:
        command = [sys.executable, "-m", "celery", "-A", "assay", "worker", "--pool=prefork",
                   "--concurrency=1", "--loglevel=ERROR", "--without-heartbeat",
                   "--without-gossip", "--without-mingle", "-B",
                   f"--schedule={self.media / 'beat-schedule'}"]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
        time.sleep(4)

    def worker_stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    # -- jobs ------------------------------------------------------------------------------------

    def ingest(self):
        import shutil
        import uuid

        from sampling.models import QueryLog
        from sampling.services import log_queue

        folder = self.media / "logs"
        folder.mkdir(exist_ok=True)
        path = folder / f"{uuid.uuid4().hex}.csv"
        shutil.copyfile(self.log, path)
        log = log_queue(project=self.project, name="drill.csv", path=path, owned=True)
        return log.job, lambda: abs(QueryLog.objects.get(pk=log.pk).stats.count() - DISTINCT)

    def pool(self):
        import random

        from judging.services import pool_build_create

        seed = random.randrange(2**31)
        job = pool_build_create(project=self.project, run_ids=self.runs, depth=100, seed=seed)
        return job, lambda: abs(self.project.pools.filter(seed=seed, depth=100).count() - 1)

    # -- faults ----------------------------------------------------------------------------------

    def kill_child(self, job) -> None:
        os.kill(int(job.worker.rsplit(":", 1)[1]), signal.SIGKILL)

    def kill_worker(self, job) -> None:
        self.worker_stop(signal.SIGKILL)
        time.sleep(2)
        self.worker_start()

    def terminate_connection(self, job) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )

    def run(self) -> None:
        self.worker_start()
        faults: dict[str, Callable] = {
            "worker child killed": self.kill_child,
            "worker killed, restarted": self.kill_worker,
            "db connection terminated": self.terminate_connection,
        }
        for kind, make in (("ingest", self.ingest), ("pool build", self.pool)):
            for fault, hit in faults.items():
                self.rows.append(self.one(kind, fault, make, hit))
            self.rows.append(self.broker_down(kind, make))
        self.report()

    def one(self, kind: str, fault: str, make: Callable, hit: Callable) -> tuple[str, ...]:
        from jobs.models import FINAL_STATES, JobState
        from jobs.services import job_enqueue

        job, wrong_rows = make()
        job_enqueue(job)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.state != JobState.QUEUED:
                break
            time.sleep(0.05)
        landed = job.state == JobState.RUNNING
        if landed:
            hit(job)
        started = time.monotonic()
        while time.monotonic() - started < 120:
            job.refresh_from_db()
            if job.state in FINAL_STATES:
                break
            time.sleep(0.2)
        time.sleep(int(FAST["JOB_HEARTBEAT_TIMEOUT"]) + 2 * int(FAST["JOB_REAP_INTERVAL"]))
        job.refresh_from_db()
        seconds = f"{time.monotonic() - started:.1f}"
        stuck = str(int(job.state not in FINAL_STATES))
        return (kind, fault, "yes" if landed else "no", job.state, str(job.attempts), seconds,
                stuck, str(wrong_rows()), str(self.files()))  # fmt: skip

    def broker_down(self, kind: str, make: Callable) -> tuple[str, ...]:
        from assay.celery import app
        from jobs.errors import QueueUnavailable
        from jobs.models import Job
        from jobs.services import job_enqueue

        before = Job.objects.count()
        good = os.environ["CELERY_BROKER_URL"]  # Celery reads it before its own setting
        os.environ["CELERY_BROKER_URL"] = "redis://127.0.0.1:9/0"  # nothing listens there
        app._after_fork()
        started = time.monotonic()
        try:
            job, _ = make()
            job_enqueue(job)
            refused = "no"
        except QueueUnavailable:
            refused = "yes"
        finally:
            os.environ["CELERY_BROKER_URL"] = good
            app._after_fork()
        seconds = f"{time.monotonic() - started:.1f}"
        left = Job.objects.count() - before
        return (kind, "broker unreachable", refused, "(refused)", "0", seconds, str(left),
                str(left), str(self.files()))  # fmt: skip

    def files(self) -> int:
        return (
            sum(1 for _ in (self.media / "logs").glob("*")) if (self.media / "logs").exists() else 0
        )

    def report(self) -> None:
        head = ("job", "fault", "landed", "state", "attempts", "s to end", "not final",
                "rows lost/dup", "files left")  # fmt: skip
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(len(head))]
        for row in [head, tuple("-" * w for w in widths), *self.rows]:
            print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
