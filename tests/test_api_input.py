"""Hostile input to the API: every answer is JSON with a clear 4xx, never a 500 or a page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from assay.api_parsers import MAX_DEPTH
from tests.conftest import World

pytestmark = pytest.mark.django_db


def signed_in(world: World) -> APIClient:
    client = APIClient()
    client.force_authenticate(world.alice)
    return client


DEEP = ["[" * 100_000, '{"a":' * 100_000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)]


def operations_with_a_body(*, json: bool = True) -> list[tuple[str, str]]:
    """(method, path) of every operation of the schema that takes a JSON body (or, with
    `json=False`, a body of another kind only: a file upload), later ones included."""
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    return [
        (method.upper(), path)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "requestBody" in operation
        and ("application/json" in operation["requestBody"].get("content", {})) == json
    ]


def filled(path: str, slug: str) -> str:
    """The path with its parameters: a number where it takes one, else a name; neither need
    exist, as the body is read before anything is looked up."""
    url = path.replace("{slug}", slug)
    url = re.sub(r"\{(number|id|pk|\w+_id)\}", "1", url)
    return re.sub(r"\{\w+\}", "x", url)


@pytest.mark.parametrize(("method", "path"), operations_with_a_body())
@pytest.mark.parametrize("body", DEEP, ids=["100000-lists", "100000-objects", "one-too-deep"])
def test_it_refuses_a_deeply_nested_json_body_with_400(
    world: World, method: str, path: str, body: str
) -> None:
    url = filled(path, world.project.slug)
    response = signed_in(world).generic(method, url, body, content_type="application/json")
    assert response.status_code == 400
    detail = f"JSON parse error - nested deeper than {MAX_DEPTH} levels"
    assert response.json() == {"detail": detail}


@pytest.mark.parametrize(("method", "path"), operations_with_a_body(json=False))
def test_an_upload_operation_refuses_a_json_body_with_415(
    world: World, method: str, path: str
) -> None:
    url = filled(path, world.project.slug)
    response = signed_in(world).generic(method, url, DEEP[2], content_type="application/json")
    assert response.status_code == 415
    assert "Unsupported media type" in response.json()["detail"]


def test_it_still_reads_a_body_nested_as_deep_as_allowed(world: World) -> None:
    # Refused for its content (a list is not a version number), not for its depth.
    body = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    url = reverse("api_protocol_ack", args=[world.project.slug])
    response = signed_in(world).generic("POST", url, f'{{"version": {body}}}', "application/json")
    assert response.status_code == 400
    assert response.json()["errors"] == {"version": ["A valid integer is required."]}
    assert response.json()["detail"] == "invalid input - version: A valid integer is required."


@pytest.mark.parametrize(
    "path", ["/api/projects/not%20a%20slug/next/", "/api/nothing/", "/api/projects/acme/"]
)
def test_it_answers_json_for_api_paths_no_view_serves(world: World, path: str) -> None:
    response = signed_in(world).get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}


def test_it_keeps_the_html_page_for_other_paths(world: World) -> None:
    response = world.client_for(world.alice).get("/p/not%20a%20slug/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_it_answers_json_for_wrong_methods_and_strangers(world: World) -> None:
    url = reverse("api_next", args=[world.project.slug])
    response = signed_in(world).delete(url)
    assert response.status_code == 405 and set(response.json()) == {"detail"}
    response = APIClient().get(url)
    assert response.status_code in (401, 403) and set(response.json()) == {"detail"}
