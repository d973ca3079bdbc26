"""Qrels out of a project."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from annotation.models import Project
from judging.models import Judgment
from pooling.trec import format_qrels_line


class Writer(Protocol):
    def write(self, text: str, /) -> object: ...


@dataclass(frozen=True)
class ExportReport:
    pairs: int
    conflicting: int


def qrels_export(*, project: Project, out: Writer, annotator: str | None = None) -> ExportReport:
    """Write the project's judgments as TREC qrels (`qid 0 docid grade`), sorted by qid, docid.

    Until adjudication exists, a pair judged by several people takes its first judgment's grade
    and is counted in `conflicting` when the others disagree. With `annotator`, only that
    person's judgments are written (one qrels file per judge feeds the agreement command).
    """
    judgments = Judgment.objects.filter(pool_item__pool__project=project)
    if annotator is not None:
        judgments = judgments.filter(user__username=annotator)
    rows = judgments.order_by("created_at", "pk").values_list(
        "pool_item__query__qid", "pool_item__document__docid", "grade"
    )
    first: dict[tuple[str, str], int] = {}
    conflicting: set[tuple[str, str]] = set()
    for qid, docid, grade in rows.iterator(chunk_size=5000):
        kept = first.setdefault((qid, docid), grade)
        if kept != grade:
            conflicting.add((qid, docid))
    for (qid, docid), grade in sorted(first.items()):
        out.write(format_qrels_line(qid, docid, grade) + "\n")
    return ExportReport(pairs=len(first), conflicting=len(conflicting))
