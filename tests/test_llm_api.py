"""The LLM judge through the API: leads only, and the gate holds here as on the page and in the
command — labelling is refused (409) and nothing is called until the version passed."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Role
from annotation.services import membership_set
from jobs.models import Job, JobState
from judging.models import Calibration, LLMJudgment
from judging.services_llm import judge_version_current
from tests.conftest import make_user
from tests.llm_project import endpoint_judge, llm_project, server
from tests.llm_server import LLMServer

__all__ = ["server"]  # the fixture, used by name

pytestmark = pytest.mark.django_db


def client_of(username: str, project, role: Role | None) -> Client:
    user = make_user(username)
    if role is not None:
        membership_set(project=project, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


def urls(slug: str, name: str) -> dict[str, str]:
    return {
        "status": reverse("api_llm_judge", args=[slug, name]),
        "calibration": reverse("api_llm_judge_calibration", args=[slug, name]),
        "label": reverse("api_llm_judge_label", args=[slug, name]),
    }


def test_it_answers_leads_only(server: LLMServer) -> None:
    project = llm_project()
    endpoint_judge(project, server)
    url = urls(project.slug, "gpt")
    annotator = client_of("ann", project, Role.ANNOTATOR)
    outsider = client_of("out", project, None)
    for path in (url["status"], url["calibration"]):
        assert annotator.get(path).status_code == 403
        assert outsider.get(path).status_code == 404
    assert annotator.post(url["label"], {}).status_code == 403
    assert outsider.post(url["label"], {}).status_code == 404
    assert not Job.objects.exists() and server.requests == 0


def test_it_refuses_to_label_before_a_passed_calibration_and_labels_after(
    server: LLMServer,
) -> None:
    project = llm_project()
    judge = endpoint_judge(project, server)
    lead = client_of("lea", project, Role.LEAD)
    url = urls(project.slug, "gpt")
    status = lead.get(url["status"]).json()
    assert status["gate"] == "not calibrated" and status["counts"]["labelled"] == 0
    assert lead.get(url["calibration"]).status_code == 404
    refused = lead.post(url["label"], {"mode": "label"}, content_type="application/json")
    assert refused.status_code == 409 and "no calibration" in refused.json()["detail"]
    assert not Job.objects.exists() and server.requests == 0

    version = judge_version_current(judge=judge)
    Calibration.objects.create(version=version, n=120, passed=True, report={"n": 120})
    assert lead.get(url["calibration"]).json() == {"n": 120}
    started = lead.post(url["label"], {"limit": 5}, content_type="application/json")
    assert started.status_code == 202, started.content
    body = started.json()
    assert body["version"] == version.digest and body["mode"] == "label"
    assert Job.objects.get(pk=body["job"]).state == JobState.DONE  # eager: run at once
    assert LLMJudgment.objects.filter(version=version).count() == 5 == server.requests


def test_it_refuses_a_bad_mode_or_limit_and_starts_nothing(server: LLMServer) -> None:
    project = llm_project()
    endpoint_judge(project, server)
    lead = client_of("lea", project, Role.LEAD)
    url = urls(project.slug, "gpt")["label"]
    for body in ({"mode": "calibration"}, {"limit": 0}, {"limit": "many"}):
        assert lead.post(url, body, content_type="application/json").status_code == 400
    assert not Job.objects.exists()
