"""`import_judgments SLUG FILE --as NAME [--kind human|llm]`: qrels as a person's judgments or
as an external judge's labels; all or nothing, `file:line` errors, idempotent."""

from __future__ import annotations

import gzip
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from annotation.models import Membership, Role
from judging.models import JudgeKind, JudgeVersion, Judgment, LLMJudge, LLMJudgment
from tests.conftest import World

pytestmark = pytest.mark.django_db

GOOD = "q1 0 d1 3\nq1 0 d2 0\nq1 0 d3 1\nq2 0 d1 2\n"


def _file(tmp_path: Path, text: str, name: str = "qrels.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _import(path: Path, name: str, *extra: str) -> str:
    out = StringIO()
    call_command("import_judgments", "acme", str(path), "--as", name, *extra, stdout=out)
    return out.getvalue()


def _state() -> tuple[int, int, int, int, int]:
    return (
        Judgment.objects.count(),
        User.objects.count(),
        Membership.objects.count(),
        LLMJudgment.objects.count(),
        JudgeVersion.objects.count(),
    )


def test_it_imports_a_person_without_a_password_as_an_annotator(world: World, tmp_path) -> None:
    out = _import(_file(tmp_path, GOOD), "nist")
    assert "4 judgments read as new person 'nist': 4 stored" in out
    user = User.objects.get(username="nist")
    assert not user.has_usable_password()
    assert Membership.objects.get(user=user, project=world.project).role == Role.ANNOTATOR
    rows = Judgment.objects.filter(user=user)
    assert sorted((j.pair.query.qid, j.pair.document.docid, j.grade) for j in rows) == [
        ("q1", "d1", 3),
        ("q1", "d2", 0),
        ("q1", "d3", 1),
        ("q2", "d1", 2),
    ]
    protocol = world.project.current_protocol()
    assert protocol is not None
    assert {(j.kind, j.seconds_spent, j.protocol_id) for j in rows} == {("grade", 0.0, protocol.pk)}


def test_it_imports_the_same_file_twice_without_a_duplicate(world: World, tmp_path) -> None:
    path = _file(tmp_path, GOOD)
    _import(path, "nist")
    assert "0 stored, 4 already stored" in _import(path, "nist")
    changed = _file(tmp_path, GOOD.replace("q1 0 d2 0", "q1 0 d2 2"), "changed.txt")
    assert "1 stored, 3 already stored" in _import(changed, "nist")
    assert Judgment.objects.filter(user__username="nist").count() == 5


def test_it_keeps_a_lead_a_lead(world: World, tmp_path) -> None:
    _import(_file(tmp_path, GOOD), "lena")
    assert Membership.objects.get(user=world.lead, project=world.project).role == Role.LEAD


def test_it_reads_gzip(world: World, tmp_path) -> None:
    path = tmp_path / "qrels.txt.gz"
    path.write_bytes(gzip.compress(GOOD.encode()))
    assert "4 stored" in _import(path, "nist")


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("q1 0 d1 3\nq1 0 d2 4\n", ":2:", "grade 4 is outside the scale 0..3"),
        ("q1 0 d1 3\nq1 0 d2 -1\n", ":2:", "outside the scale"),
        ("q1 0 d1 3\nq1 0 d2\n", ":2:", "expected 4 columns"),
        ("q1 0 d1 3\nq1 0 d2 x\n", ":2:", "grade"),
        ("q1 0 d1 3\nq1 0 d1 2\n", ":2:", "judged twice"),
        ("", "", "holds no judgments"),
    ],
)
def test_it_refuses_a_bad_file_naming_the_line_and_writes_nothing(
    world: World, tmp_path, text: str, where: str, what: str
) -> None:
    path = _file(tmp_path, text)
    before = _state()
    for kind in ("human", "llm"):
        with pytest.raises(CommandError) as error:
            _import(path, "nist", "--kind", kind)
        assert f"{path}{where}" in str(error.value) and what in str(error.value)
        assert "Nothing was imported" in str(error.value)
    assert _state() == before


def test_it_refuses_pairs_the_project_lacks_and_names_them(world: World, tmp_path) -> None:
    path = _file(tmp_path, GOOD + "q9 0 d1 1\nq1 0 d99 2\n")
    before = _state()
    with pytest.raises(CommandError) as error:
        _import(path, "nist")
    message = str(error.value)
    assert "2 of 6 judged pairs are not pairs of project 'acme'" in message
    assert f"{path}:5: query q9 document d1" in message and f"{path}:6:" in message
    assert _state() == before
    assert not User.objects.filter(username="nist").exists()


def test_it_imports_an_external_judge_as_one_version_per_set_of_labels(
    world: World, tmp_path
) -> None:
    out = _import(_file(tmp_path, GOOD), "umbrela", "--kind", "llm")
    judge = LLMJudge.objects.get(name="umbrela")
    assert judge.kind == JudgeKind.EXTERNAL and "4 stored" in out
    version = judge.versions.get()
    assert {(r.status, r.repeat) for r in version.judgments.all()} == {("ok", 0)}
    # The same labels in another order are the same version: nothing new.
    shuffled = _file(tmp_path, "".join(reversed(GOOD.splitlines(keepends=True))), "again.txt")
    assert "0 stored, 4 already stored" in _import(shuffled, "umbrela", "--kind", "llm")
    assert judge.versions.count() == 1
    changed = _file(tmp_path, GOOD.replace("q1 0 d1 3", "q1 0 d1 2"), "changed.txt")
    _import(changed, "umbrela", "--kind", "llm")
    assert judge.versions.count() == 2 and LLMJudgment.objects.count() == 8
    assert not User.objects.filter(username="umbrela").exists()


def test_it_refuses_labels_for_an_endpoint_judge(world: World, tmp_path) -> None:
    LLMJudge.objects.create(project=world.project, name="gpt", base_url="http://x", model="m")
    with pytest.raises(CommandError, match="calls an endpoint"):
        _import(_file(tmp_path, GOOD), "gpt", "--kind", "llm")
    assert JudgeVersion.objects.count() == 0


def test_it_refuses_an_unknown_project(tmp_path, db: None) -> None:
    with pytest.raises(CommandError, match="does not exist"):
        _import(_file(tmp_path, GOOD), "nist")
