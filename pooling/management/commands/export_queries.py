"""``manage.py export_queries``: the project's queries for the team's own systems to answer."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import project_by_slug
from formats.beir import QUERY_FORMATS, QueryRow, write_queries
from pooling.services_runs import queries_for_export, query_rows


class Command(BaseCommand):
    help = (
        "Write the project's queries as TSV (qid<TAB>text), JSONL ({qid, text, description?, "
        "stratum?}) or TREC topics XML; import_queries reads each back unchanged. "
        "--without-runs keeps only the queries no run of the project has a line for."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project")
        parser.add_argument("--format", choices=sorted(QUERY_FORMATS), default="tsv")
        parser.add_argument(
            "--without-runs",
            action="store_true",
            help="only queries without runs yet (no run of the project has a line for them)",
        )
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        queries = queries_for_export(project=project, without_runs=options["without_runs"])
        counted = _Counted(query_rows(queries))
        pieces = write_queries(counted, options["format"])
        try:
            if options["output"]:
                _write_whole(Path(options["output"]), pieces)
            else:
                for piece in pieces:
                    self.stdout.write(piece, ending="")
        except (ValueError, OSError) as error:
            raise CommandError(f"{error}. Nothing was written.") from error
        which = "without runs" if options["without_runs"] else "in all"
        sys.stderr.write(f"{counted.count} queries written ({which})\n")


class _Counted:
    def __init__(self, rows: Iterator[QueryRow]) -> None:
        self._rows, self.count = rows, 0

    def __iter__(self) -> Iterator[QueryRow]:
        for row in self._rows:
            self.count += 1
            yield row


def _write_whole(target: Path, pieces: Iterator[str]) -> None:
    """Write to a temporary file beside ``target``, then put it in place: a failed export
    leaves an existing file as it was."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.writelines(pieces)
        os.replace(name, target)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
