"""Qrels out of a project."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from django.contrib.auth.models import User

from annotation.models import Project
from formats.trec import format_qrels_line
from judging.answers import gold_check
from judging.models import Judgment, Kind


class Writer(Protocol):
    def write(self, text: str, /) -> object: ...


class ExportError(ValueError):
    """An export that cannot be made as asked; the message says why."""


@dataclass(frozen=True)
class ExportReport:
    pairs: int
    conflicting: int


def qrels_export(*, project: Project, out: Writer, annotator: str | None = None) -> ExportReport:
    """Write the project's current grades as TREC qrels (`qid 0 docid grade`), sorted.

    Judgments are append-only, so each person's current answer on a pair is their latest row;
    only current answers that are grades count (unsure, skipped and undone items are left out).
    Until adjudication exists, a pair graded by several people takes the grade of the person
    who judged it first, and is counted in `conflicting` when the others' grades differ. With
    `annotator`, only that person's grades are written (one file per judge feeds `agreement`);
    a name that is no user's is an ExportError, raised before anything is written.
    """
    if annotator is not None:
        _check_annotator(annotator)
    current = _current_grades(project, annotator)
    kept: dict[tuple[str, str], int] = {}
    conflicting = 0
    for pair, by_judge in current.items():
        grades = [grade for _first, grade in sorted(by_judge)]
        kept[pair] = grades[0]
        conflicting += len(set(grades)) > 1
    for (qid, docid), grade in sorted(kept.items()):
        out.write(format_qrels_line(qid, docid, grade) + "\n")
    return ExportReport(pairs=len(kept), conflicting=conflicting)


def _check_annotator(username: str) -> None:
    # A mistyped name would give an empty file, and `agreement` on it would compare nothing.
    # No username holds a NUL (and PostgreSQL refuses one in a query).
    if "\x00" in username or not User.objects.filter(username=username).exists():
        raise ExportError(f"no user named {username!r}")


def _current_grades(
    project: Project, annotator: str | None
) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(qid, docid) -> [(id of the judge's first row on the pair, their current grade)]."""
    # Gold checks measure a person against a known grade: they are never labels.
    judgments = Judgment.objects.filter(pair__query__project=project).exclude(gold_check())
    if annotator is not None:
        judgments = judgments.filter(user__username=annotator)
    rows = judgments.order_by("pk").values_list(
        "pk", "user_id", "pair__query__qid", "pair__document__docid", "kind", "grade"
    )
    first: dict[tuple[str, str, int], int] = {}
    latest: dict[tuple[str, str, int], int | None] = {}
    for pk, user_id, qid, docid, kind, grade in rows.iterator(chunk_size=5000):
        key = (qid, docid, user_id)
        first.setdefault(key, pk)
        latest[key] = grade if kind == Kind.GRADE else None
    current: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for (qid, docid, user_id), grade in latest.items():
        if grade is not None:
            current.setdefault((qid, docid), []).append((first[(qid, docid, user_id)], grade))
    return current
