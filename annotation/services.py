"""Writes to projects, memberships, protocols, documents and queries."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from assay.db import bulk_insert, max_length
from formats.beir import FormatError, iter_corpus, iter_queries
from formats.text import OnProgress

from . import protocol as core
from .models import (
    Document,
    Membership,
    Project,
    ProtocolDraft,
    ProtocolVersion,
    Query,
    Role,
    empty_protocol_content,
)


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


class ProjectError(ValueError):
    """A project that cannot be created; `problems` maps a field to what is wrong with it."""

    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__(" ".join(problems.values()))
        self.problems = problems


SLUG_RE = re.compile(r"[-a-zA-Z0-9_]+")  # what the URLs' <slug:...> converter matches


def project_problems(*, slug: str, name: str, description: str = "") -> dict[str, str]:
    """What stops a project from being created with these fields, by field (empty: nothing)."""
    found: dict[str, str] = {}
    limit = max_length(Project, "slug")
    if not slug:
        found["slug"] = "Give the project a slug: the short name in its addresses (/p/slug/)."
    elif not SLUG_RE.fullmatch(slug):
        bad = next(c for c in slug if not SLUG_RE.fullmatch(c))
        found["slug"] = (
            f"The slug may hold only letters, digits, hyphens and underscores, not {bad!r}."
        )
    elif len(slug) > limit:
        found["slug"] = f"The slug is {len(slug)} characters long; at most {limit}."
    elif Project.objects.filter(slug=slug).exists():
        found["slug"] = f"A project with the slug {slug!r} exists already: choose another."
    name_limit = max_length(Project, "name")
    if len(name) > name_limit:
        found["name"] = f"The name is {len(name)} characters long; at most {name_limit}."
    for field, value in (("name", name), ("description", description)):
        if "\x00" in value:
            found[field] = "This field holds a NUL character, which a database cannot store."
    return found


def project_start(
    *, slug: str, name: str, description: str = "", lead: User | None = None
) -> Project:
    """A project created by a person (the New project page, `create_project`): the creator
    becomes its lead, and the protocol editor opens on a starter draft (the four grades to
    make the team's own), which nobody reads until a lead publishes it. An empty name is the
    slug. Raises ProjectError, with nothing created, for a bad or taken slug."""
    name = name or slug
    problems = project_problems(slug=slug, name=name, description=description)
    if problems:
        raise ProjectError(problems)
    try:
        return _project_start(slug=slug, name=name, description=description, lead=lead)
    except IntegrityError:  # another person took the slug a moment ago
        raise ProjectError(
            {"slug": f"A project with the slug {slug!r} exists already: choose another."}
        ) from None


@transaction.atomic
def _project_start(*, slug: str, name: str, description: str, lead: User | None) -> Project:
    project = project_create(slug=slug, name=name, description=description)
    if lead is not None:
        membership_set(project=project, user=lead, role=Role.LEAD)
    content = core.to_content(core.starter(name))
    ProtocolDraft.objects.create(project=project, text=content.pop("intro"), content=content)
    return project


@transaction.atomic
def membership_set(*, project: Project, user: User, role: Role) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": role}
    )
    return membership


@transaction.atomic
def protocol_publish(
    *,
    project: Project,
    text: str,
    content: dict[str, Any] | None = None,
    user: User | None = None,
) -> ProtocolVersion:
    """Publish a new protocol version; earlier versions stay as they were.

    `text` is the whole protocol as Markdown (what annotators read and what diffs compare);
    `content` its structure (see `annotation.protocol`), empty for a text-only protocol.
    """
    # Lock the project row so two leads publishing at once cannot take the same number.
    Project.objects.select_for_update().get(pk=project.pk)
    last = project.protocols.order_by("-number").values_list("number", flat=True).first()
    return ProtocolVersion.objects.create(
        project=project,
        number=(last or 0) + 1,
        text=text,
        content=content if content is not None else empty_protocol_content(),
        published_by=user,
    )


@transaction.atomic
def corpus_import(
    *, project: Project, path: str | Path, on_progress: OnProgress | None = None
) -> ImportReport:
    """Stream a BEIR corpus.jsonl or a TSV corpus into the project, in batches.

    All or nothing: a malformed line anywhere raises FormatError and nothing is kept.
    Documents already in the project keep their text, so judgments made on them stay valid.
    ``on_progress`` follows the reading of the file (rows are stored as they are read).
    """
    existing = set(project.documents.values_list("docid", flat=True))
    docs = iter_corpus(path, max_id_length=max_length(Document, "docid"), on_progress=on_progress)
    fresh = _skip_existing(docs, lambda d: d.docid, existing)
    rows = ((project.pk, doc.docid, doc.title, doc.text, doc.metadata) for doc in fresh)
    columns = ["project_id", "docid", "title", "text", "metadata"]
    created = bulk_insert(Document, columns, rows)
    return _report(path, "documents", created, fresh.skipped)


@transaction.atomic
def queries_import(
    *, project: Project, path: str | Path, on_progress: OnProgress | None = None
) -> ImportReport:
    """Stream queries.jsonl, a `qid<TAB>text` file or TREC topics XML into the project (all
    or nothing)."""

    existing = set(project.queries.values_list("qid", flat=True))
    queries = iter_queries(
        path,
        max_id_length=max_length(Query, "qid"),
        max_stratum_length=max_length(Query, "stratum"),
        on_progress=on_progress,
    )
    fresh = _skip_existing(queries, lambda q: q.qid, existing)
    # A query without a stratum (TSV, XML, most JSONL) belongs to the single stratum ("") until
    # a stratified sample sets one; a JSONL export of a sampled project keeps its strata.
    rows = ((project.pk, q.qid, q.text, q.description, q.stratum) for q in fresh)
    created = bulk_insert(Query, ["project_id", "qid", "text", "description", "stratum"], rows)
    return _report(path, "queries", created, fresh.skipped)


def _report(path: str | Path, kind: str, created: int, unchanged: int) -> ImportReport:
    # An empty file is a wrong path or a failed download; "0 created" would hide it.
    if not created and not unchanged:
        raise FormatError(path, 0, f"the file holds no {kind}")
    return ImportReport(created=created, unchanged=unchanged)


class _skip_existing[T]:
    """Iterate over rows whose key is not in `existing`, counting the ones skipped."""

    def __init__(self, rows: Iterable[T], key: Callable[[T], str], existing: set[str]) -> None:
        self._rows, self._key, self._existing = iter(rows), key, existing
        self.skipped = 0

    def __iter__(self) -> Iterator[T]:
        for row in self._rows:
            if self._key(row) in self._existing:
                self.skipped += 1
            else:
                yield row
