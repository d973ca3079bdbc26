"""Writes to projects, memberships, protocols, documents and queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from django.contrib.auth.models import User
from django.db import models, transaction

from pooling.trec import CorpusDoc, QueryRow, iter_corpus, iter_queries

from .models import Document, Membership, Project, ProtocolVersion, Query, Role

BATCH_SIZE = 2000


@dataclass(frozen=True)
class ImportReport:
    """What an import did: rows created, and rows already present that were left unchanged."""

    created: int
    unchanged: int

    def __str__(self) -> str:
        return f"{self.created} created, {self.unchanged} already present (left unchanged)"


@transaction.atomic
def project_create(*, slug: str, name: str, description: str = "") -> Project:
    return Project.objects.create(slug=slug, name=name, description=description)


@transaction.atomic
def membership_set(*, project: Project, user: User, role: Role) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": role}
    )
    return membership


@transaction.atomic
def protocol_publish(*, project: Project, text: str) -> ProtocolVersion:
    """Publish a new protocol version; earlier versions stay as they were."""
    # Lock the project row so two leads publishing at once cannot take the same number.
    Project.objects.select_for_update().get(pk=project.pk)
    last = project.protocols.order_by("-number").values_list("number", flat=True).first()
    return ProtocolVersion.objects.create(project=project, number=(last or 0) + 1, text=text)


@transaction.atomic
def corpus_import(*, project: Project, path: str | Path) -> ImportReport:
    """Stream a BEIR corpus.jsonl or a TSV corpus into the project, in batches.

    All or nothing: a malformed line anywhere raises FormatError and nothing is kept.
    Documents already in the project keep their text, so judgments made on them stay valid.
    """

    def build(doc: CorpusDoc) -> Document:
        return Document(project=project, docid=doc.docid, title=doc.title, text=doc.text)

    existing = set(project.documents.values_list("docid", flat=True))
    return _bulk_import(iter_corpus(path), lambda d: d.docid, existing, build, Document)


@transaction.atomic
def queries_import(*, project: Project, path: str | Path) -> ImportReport:
    """Stream queries.jsonl or a `qid<TAB>text` file into the project (all or nothing)."""

    def build(row: QueryRow) -> Query:
        return Query(project=project, qid=row.qid, text=row.text)

    existing = set(project.queries.values_list("qid", flat=True))
    return _bulk_import(iter_queries(path), lambda q: q.qid, existing, build, Query)


def _bulk_import[T, M: models.Model](
    rows: Iterable[T],
    key: Callable[[T], str],
    existing: set[str],
    build: Callable[[T], M],
    model: type[M],
) -> ImportReport:
    created = unchanged = 0

    def fresh() -> Iterator[T]:
        nonlocal unchanged
        for row in rows:
            if key(row) in existing:
                unchanged += 1
            else:
                yield row

    stream = fresh()
    while batch := [build(row) for row in islice(stream, BATCH_SIZE)]:
        model._default_manager.bulk_create(batch)
        created += len(batch)
    return ImportReport(created=created, unchanged=unchanged)
