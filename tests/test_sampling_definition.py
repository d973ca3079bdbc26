"""The project's strata definition: set by its first log (upload form or import_log), kept after."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from sampling import services
from sampling.core import FailureRule, StrataDefinition
from sampling.models import LogQueryStat, LogStatus, QueryLog, SamplingScheme
from sampling.services import DEFINITION_KEPT, log_ingest, log_queue
from tests.conftest import World
from tests.test_sampling_web import make_log

pytestmark = pytest.mark.django_db

FIRST = StrataDefinition(
    head_share=0.5,
    torso_share=0.8,
    failures=FailureRule(zero_result_rate=None, min_frequency=3),
    reformulation_window=60.0,
    pii="mask",
)
FIRST_FORM = {
    "cuts": "50,80",
    "failures": "zero_result_rate=off,min_frequency=3",
    "reformulation_window": "60",
    "mask_pii": "on",
}


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def upload(world: World, capture, form: dict[str, str], content: bytes | None = None):
    client = world.client_for(world.lead)
    data = {"log": SimpleUploadedFile("log.csv", content or make_log()), "columns": "", **form}
    with capture(execute=True):
        return client.post(reverse("log_list", args=[world.project.slug]), data, follow=True)


def scheme(world: World) -> StrataDefinition:
    return StrataDefinition.from_dict(SamplingScheme.objects.get(project=world.project).definition)


def test_it_takes_the_definition_of_the_first_upload(
    world: World, django_capture_on_commit_callbacks
) -> None:
    page = world.client_for(world.lead).get(reverse("log_list", args=[world.project.slug]))
    assert 'name="cuts"' in page.content.decode()  # no log yet: the definition is open
    upload(world, django_capture_on_commit_callbacks, FIRST_FORM)
    query_log = QueryLog.objects.get()
    assert query_log.status == LogStatus.DONE, query_log.error
    assert scheme(world) == FIRST
    queries = set(LogQueryStat.objects.values_list("query", flat=True))
    assert "contact [email]" in queries  # masked, not excluded
    detail = world.client_for(world.lead).get(
        reverse("log_detail", args=[world.project.slug, query_log.pk])
    )
    text = detail.content.decode()
    assert "Personal data (masked):" in text and "email 1 queries / 1 events" in text
    assert "maskd" not in text
    assert "head &lt;= 50.0% and head+torso &lt;= 80.0% of traffic" in text
    listing = world.client_for(world.lead).get(reverse("log_list", args=[world.project.slug]))
    assert 'name="cuts"' not in listing.content.decode()  # fixed now: shown, not asked
    assert "fixed by this project's first log" in listing.content.decode()


def test_it_keeps_the_stored_definition_for_later_logs_and_says_so(
    world: World, django_capture_on_commit_callbacks
) -> None:
    upload(world, django_capture_on_commit_callbacks, FIRST_FORM)
    response = upload(world, django_capture_on_commit_callbacks, {"cuts": "10,20"})
    assert "strata definition was fixed by its first log" in response.content.decode()
    later = QueryLog.objects.latest("pk")
    assert later.status == LogStatus.DONE and scheme(world) == FIRST
    assert later.strata is not None and later.strata["warnings"][0] == DEFINITION_KEPT
    assert StrataDefinition.from_dict(later.strata["definition"]) == FIRST
    quiet = upload(world, django_capture_on_commit_callbacks, {})  # nothing asked: no note
    assert "fixed by its first log" not in quiet.content.decode().split("<form")[0]


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"cuts": "0.5,1.5"}, "cuts mix fractions and percentages"),
        ({"cuts": "80,50"}, "cut points must satisfy"),
        ({"failures": "speed=1"}, "unknown failure setting"),
        ({"reformulation_window": "-5"}, "reformulation_window must be a positive number"),
    ],
)
def test_it_refuses_a_bad_definition_on_upload(
    world: World, django_capture_on_commit_callbacks, form: dict[str, str], message: str
) -> None:
    response = upload(world, django_capture_on_commit_callbacks, form)
    assert message in response.content.decode()
    assert not QueryLog.objects.exists()


def test_it_fails_a_first_log_whose_definition_another_log_fixed_meanwhile(
    world: World, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = services.ingest_log

    def slow(*args, **kwargs):  # another first log is stored while this one is read
        SamplingScheme.objects.create(project=world.project, definition=FIRST.to_dict())
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "ingest_log", slow)
    media.mkdir(parents=True)
    path = media / "log.csv"
    path.write_bytes(make_log())
    query_log = log_queue(project=world.project, name="log.csv", path=path, owned=True)
    done = log_ingest(log_id=query_log.pk)
    assert done.status == LogStatus.FAILED and "read this log again" in done.error
    assert not LogQueryStat.objects.exists() and scheme(world) == FIRST


# --------------------------------------------------------------------------- import_log


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_log", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_takes_the_definition_of_the_first_import(world: World, tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(make_log().replace(b"dark mode", b"dark \xff mode"))
    args = ("--cuts", "50,80", "--failures", "zero_result_rate=off,min_frequency=3")
    out, _ = run(world.project.slug, str(path), *args, "--reformulation-window", "60", "--mask-pii")
    assert scheme(world) == FIRST
    assert "personal data (masked): email 1 queries / 1 events" in out
    assert "1 lines with invalid UTF-8 repaired" in out and "0 malformed lines" in out
    _, err = run(world.project.slug, str(path), "--cuts", "10,20")
    assert "the options given are not used" in err and "head <= 50.0%" in err
    assert scheme(world) == FIRST
    assert QueryLog.objects.latest("pk").strata["warnings"][0] == DEFINITION_KEPT  # type: ignore[index]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cuts", "0.5,1.5"), "cuts mix fractions and percentages"),
        (("--failures", "abandonment_rate=high"), "needs a number"),
        (("--reformulation-window", "0"), "reformulation_window must be a positive number"),
    ],
)
def test_it_refuses_a_bad_definition_on_import(
    world: World, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(make_log())
    with pytest.raises(CommandError, match=message):
        run(world.project.slug, str(path), *args)
    assert not QueryLog.objects.exists()
