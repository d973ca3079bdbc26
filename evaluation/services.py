"""Qrels out of a project."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from django.contrib.auth.models import User

from agreement.labels import DEFAULT_POLICY, LabelCounts, Policy
from agreement.services_adjudication import final_labels_of
from annotation.models import Project
from formats.trec import format_qrels_line
from judging.answers import current_answers
from judging.models import Kind


class Writer(Protocol):
    def write(self, text: str, /) -> object: ...


class ExportError(ValueError):
    """An export that cannot be made as asked; the message says why."""


@dataclass(frozen=True)
class ExportReport:
    pairs: int  # lines written
    counts: LabelCounts | None = None  # the final labels' counts; None for one person's grades
    annotator: str | None = None

    @property
    def unresolved(self) -> int:
        return self.counts.unresolved if self.counts else 0

    def summary(self) -> str:
        """What was written, for a person: the counts per provenance and the policy."""
        if self.counts is None:
            return f"{self.pairs} pairs written: {self.annotator}'s own current grades"
        return self.counts.summary()


def qrels_export(
    *,
    project: Project,
    out: Writer,
    annotator: str | None = None,
    unresolved: Policy = DEFAULT_POLICY,
) -> ExportReport:
    """Write the project's final labels as TREC qrels (`qid 0 docid grade`), sorted.

    A pair's final grade is its standing adjudication, else its judges' current grade when one
    judge graded it or all agree; pairs whose judges disagree and that no lead has adjudicated
    are written by the `unresolved` policy (see `agreement.labels`). Unsure, skipped and
    undone answers and gold checks label nothing. With `annotator`, only that person's own
    current grades are written (one file per judge feeds `agreement`); a name that is no user's
    is an ExportError, raised before anything is written.
    """
    if annotator is not None:
        _check_annotator(annotator)
        return _own_grades(project, annotator, out)
    labels = final_labels_of(project=project, policy=unresolved)
    lines = labels.qrels()
    for qid, docid, grade in lines:
        out.write(format_qrels_line(qid, docid, grade) + "\n")
    return ExportReport(pairs=len(lines), counts=labels.counts)


def _own_grades(project: Project, annotator: str, out: Writer) -> ExportReport:
    grades = sorted(
        (answer.qid, answer.docid, answer.grade)
        for answer in current_answers(project_id=project.pk)
        if answer.username == annotator and answer.kind == Kind.GRADE and answer.grade is not None
    )
    for qid, docid, grade in grades:
        out.write(format_qrels_line(qid, docid, grade) + "\n")
    return ExportReport(pairs=len(grades), annotator=annotator)


def _check_annotator(username: str) -> None:
    # A mistyped name would give an empty file, and `agreement` on it would compare nothing.
    # No username holds a NUL (and PostgreSQL refuses one in a query).
    if "\x00" in username or not User.objects.filter(username=username).exists():
        raise ExportError(f"no user named {username!r}")
