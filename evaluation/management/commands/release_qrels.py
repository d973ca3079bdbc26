"""``manage.py release_qrels SLUG [--policy humans|adjudicated|llm] [--unresolved
exclude|lower|higher] [--note TEXT] [--format text|json] [--no-rescore]``: cut the project's
next release, then score every run under it here (unless ``--no-rescore``).

``--format json`` prints ``{"project", "release", "policy", "unresolved", "pairs",
"content_hash", "counts": {"grade", "stratum", "source"}, "rescore": {"state", "written",
"scored"} | null}``.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agreement.labels import POLICIES
from annotation.cli import project_by_slug
from jobs.models import JobState
from jobs.run import job_run_inline

from ...models import ReleasePolicy
from ...services_release import ReleaseError, release_create, release_rescore_start


class Command(BaseCommand):
    help = (
        "Cut the project's next qrels release (an immutable, numbered snapshot of the final "
        "labels under a policy) and score every run of the project under it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", metavar="SLUG")
        parser.add_argument(
            "--policy", choices=ReleasePolicy.values, default=ReleasePolicy.ADJUDICATED
        )
        parser.add_argument("--unresolved", choices=POLICIES, default="lower")
        parser.add_argument("--note", default="")
        parser.add_argument("--format", choices=("text", "json"), default="text")
        parser.add_argument(
            "--no-rescore", action="store_true", help="cut the release only; score no run"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        try:
            release = release_create(
                project=project,
                policy=options["policy"],
                unresolved=options["unresolved"],
                note=options["note"],
                start_rescore=False,
            )
        except ReleaseError as error:
            raise CommandError(str(error)) from error
        rescore: dict[str, Any] | None = None
        if not options["no_rescore"]:
            job = release_rescore_start(release=release)
            job_run_inline(job.pk)
            job.refresh_from_db()
            if job.state != JobState.DONE:
                raise CommandError(
                    f"release {release.number} was cut, but scoring the runs failed: "
                    f"{job.error or job.message}; re-score it from the release's page"
                )
            result = job.result or {}
            rescore = {
                "state": job.state,
                "written": result.get("written", 0),
                "scored": result.get("scored", 0),
            }
        counts = release.manifest["counts"]
        shown = {
            "project": project.slug,
            "release": release.number,
            "policy": release.policy,
            "unresolved": release.unresolved,
            "pairs": release.pairs,
            "content_hash": release.content_hash,
            "counts": counts,
            "rescore": rescore,
        }
        if options["format"] == "json":
            self.stdout.write(json.dumps(shown, indent=2, sort_keys=True))
            return
        self.stdout.write(
            f"release {release.number} of {project.slug}: {release.pairs} labels "
            f"({release.policy}, unresolved {release.unresolved})"
        )
        for name in ("source", "grade", "stratum"):
            parts = ", ".join(f"{key} {n}" for key, n in counts[name].items())
            self.stdout.write(f"  per {name}: {parts or '-'}")
        self.stdout.write(f"  content hash: {release.content_hash}")
        if rescore is not None:
            self.stdout.write(f"  runs scored: {rescore['written']} ({rescore['scored']} in all)")
