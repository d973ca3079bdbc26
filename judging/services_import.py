"""Existing qrels into a project: the judgments of a person, or the labels of an external judge.

`import_judgments SLUG FILE --as NAME [--kind human|llm]`. The file is TREC qrels
(``qid 0 docid grade``, gzip accepted). All or nothing: the first problem stops the import with
``file:line: what is wrong`` and nothing is written. A pair the project does not hold refuses the
whole file too (the count and the first lines are named): judgments belong to pairs, and pairs
come from pools, so such a line is a file of another project or a pool not built yet.

Re-importing a file changes nothing: a person's pair is written only when their current answer
differs from the file's grade; an external judge's labels are a version (the digest of the
labels) holding one row per pair.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from annotation.models import Membership, Project, Role
from annotation.services import membership_set
from formats.trec import FormatError, QrelRow, iter_qrels_numbered
from pooling.models import Pair

from .answers import current_answers
from .models import JudgeKind, JudgeVersion, Judgment, Kind, LLMJudge, LLMJudgment, LLMStatus

KINDS = ("human", "llm")
GRADES = range(0, 4)
SHOWN_UNKNOWN = 5  # unknown pairs named in the message; the rest are counted
_BATCH = 2_000


class JudgeKindError(ValueError):
    """A judge used as the kind it is not (labels imported into an endpoint judge...)."""


@transaction.atomic
def judge_external_add(*, project: Project, name: str, user: User | None = None) -> LLMJudge:
    """The project's external judge `name`, created when missing; refused when `name` is a
    judge that calls an endpoint (its labels come from its calls, not from files)."""
    judge, _ = LLMJudge.objects.get_or_create(
        project=project,
        name=name,
        defaults={"kind": JudgeKind.EXTERNAL, "created_by": user},
    )
    if judge.kind != JudgeKind.EXTERNAL:
        raise JudgeKindError(
            f"judge {name!r} of project {project.slug!r} calls an endpoint; import the labels "
            "under another name"
        )
    return judge


@transaction.atomic
def judge_external_version(*, judge: LLMJudge, digest: str, config: dict[str, Any]) -> JudgeVersion:
    """The external judge's version of one set of labels (created at its first import)."""
    version, _ = JudgeVersion.objects.get_or_create(
        judge=judge,
        digest=digest,
        defaults={"config": config, "protocol": judge.project.current_protocol()},
    )
    return version


class JudgmentsImportError(ValueError):
    """A file or a name that cannot be imported; the message says what to do."""


@dataclass(frozen=True)
class ImportResult:
    kind: str  # "human" or "llm"
    name: str
    lines: int  # judgments read
    created: int  # rows written
    unchanged: int  # judgments already stored as they are in the file
    user_created: bool = False
    member_added: bool = False
    version: str = ""  # the external judge's version digest

    def summary(self) -> str:
        who = (
            f"judge {self.name!r} version {self.version[:10]}"
            if self.kind == "llm"
            else (f"{'new person' if self.user_created else 'person'} {self.name!r}")
        )
        line = f"{self.lines} judgments read as {who}: {self.created} stored, "
        line += f"{self.unchanged} already stored"
        return line + (" (made an annotator of the project)" if self.member_added else "")


@transaction.atomic
def judgments_import(
    *, project: Project, path: str | Path, name: str, kind: str, user: User | None = None
) -> ImportResult:
    """Import the qrels at `path` as `name`'s judgments (`kind` "human") or as the labels of
    the external judge `name` (`kind` "llm"). Raises FormatError (``file:line``) or
    JudgmentsImportError; on either, nothing is written."""
    if kind not in KINDS:
        raise JudgmentsImportError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    numbered = _read(path)
    pair_ids = _pair_ids(project, path, numbered)
    labels = {pair_ids[i]: row.grade for i, (_, row) in enumerate(numbered)}
    if kind == "human":
        return _as_person(project, name, labels)
    return _as_judge(project, path, name, numbered, labels, user)


def _read(path: str | Path) -> list[tuple[int, QrelRow]]:
    numbered = list(iter_qrels_numbered(path))
    if not numbered:
        raise FormatError(path, 0, "the file holds no judgments")
    for number, row in numbered:
        if row.grade not in GRADES:
            raise FormatError(path, number, f"grade {row.grade} is outside the scale 0..3")
    return numbered


def _pair_ids(
    project: Project, path: str | Path, numbered: Sequence[tuple[int, QrelRow]]
) -> list[int]:
    """Each line's pair, in file order; refuses the file when any pair is not the project's."""
    known = {
        (qid, docid): pk
        for qid, docid, pk in Pair.objects.filter(query__project=project).values_list(
            "query__qid", "document__docid", "pk"
        )
    }
    missing = [(n, r) for n, r in numbered if (r.qid, r.docid) not in known]
    if missing:
        first = "; ".join(
            f"{path}:{n}: query {r.qid} document {r.docid}" for n, r in missing[:SHOWN_UNKNOWN]
        )
        more = f" (and {len(missing) - SHOWN_UNKNOWN} more)" if len(missing) > SHOWN_UNKNOWN else ""
        raise JudgmentsImportError(
            f"{len(missing)} of {len(numbered)} judged pairs are not pairs of project "
            f"{project.slug!r}: {first}{more}; import the runs and build the pool that holds "
            "them first"
        )
    return [known[(r.qid, r.docid)] for _, r in numbered]


# --------------------------------------------------------------------------- a person


def _person(project: Project, name: str) -> tuple[User, bool, bool]:
    """The person `name` (created without a usable password), made an annotator of the
    project unless already a member (a lead stays a lead)."""
    try:
        UnicodeUsernameValidator()(name)
    except ValidationError:
        raise JudgmentsImportError(
            f"{name!r} is not a valid user name (letters, digits and @.+-_ only)"
        ) from None
    if len(name) > User._meta.get_field("username").max_length:  # type: ignore[operator]
        raise JudgmentsImportError(f"the user name {name[:40]!r}... is too long")
    user, created = User.objects.get_or_create(username=name)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    member = Membership.objects.filter(project=project, user=user).exists()
    if not member:
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
    return user, created, not member


def _current_grades(project: Project, user: User, pair_ids: set[int]) -> dict[int, int | None]:
    """The person's current answer on each pair they answered (`answers.current_answers`, the
    one statement of "current"): the grade, or None when it is unsure or skipped."""
    return {
        answer.pair_id: answer.grade
        for answer in current_answers(project_id=project.pk)
        if answer.user_id == user.pk and answer.pair_id in pair_ids
    }


def _as_person(project: Project, name: str, labels: dict[int, int]) -> ImportResult:
    user, created, added = _person(project, name)
    current = {} if created else _current_grades(project, user, set(labels))
    protocol = project.current_protocol()
    new = [
        Judgment(
            pair_id=pair_id,
            user=user,
            kind=Kind.GRADE,
            grade=grade,
            protocol=protocol,
            seconds_spent=0.0,
            note="imported",
        )
        for pair_id, grade in labels.items()
        if current.get(pair_id, -1) != grade
    ]
    Judgment.objects.bulk_create(new, batch_size=_BATCH)
    return ImportResult(
        kind="human",
        name=name,
        lines=len(labels),
        created=len(new),
        unchanged=len(labels) - len(new),
        user_created=created,
        member_added=added,
    )


# --------------------------------------------------------------------------- an external judge


def labels_digest(numbered: Sequence[tuple[int, QrelRow]]) -> str:
    """sha256 of the labels, whatever their order in the file: the external judge's version."""
    lines = sorted(f"{r.qid}\t{r.docid}\t{r.grade}\n" for _, r in numbered)
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _as_judge(
    project: Project,
    path: str | Path,
    name: str,
    numbered: Sequence[tuple[int, QrelRow]],
    labels: dict[int, int],
    user: User | None,
) -> ImportResult:
    try:
        validate_slug(name)
        if len(name) > LLMJudge._meta.get_field("name").max_length:  # type: ignore[operator]
            raise JudgmentsImportError(f"the judge name {name[:40]!r}... is too long")
        judge = judge_external_add(project=project, name=name, user=user)
    except ValidationError:
        raise JudgmentsImportError(
            f"{name!r} is not a valid judge name (letters, digits, - and _ only)"
        ) from None
    except JudgeKindError as error:
        raise JudgmentsImportError(str(error)) from None
    digest = labels_digest(numbered)
    config = {"kind": "external", "source": Path(path).name, "labels": len(labels)}
    version = judge_external_version(judge=judge, digest=digest, config=config)
    before = version.judgments.count()
    LLMJudgment.objects.bulk_create(
        (
            LLMJudgment(version=version, pair_id=pair_id, status=LLMStatus.OK, grade=grade)
            for pair_id, grade in labels.items()
        ),
        batch_size=_BATCH,
        ignore_conflicts=True,
    )
    created = version.judgments.count() - before
    return ImportResult(
        kind="llm",
        name=name,
        lines=len(labels),
        created=created,
        unchanged=len(labels) - created,
        version=version.digest,
    )
