"""The API keeps its contract under a fuzzer: schemathesis over every operation of the schema.

The schema is the app's own (drf-spectacular, generated in process as /api/schema/ serves it),
so an operation added later is fuzzed without touching this file. The app is called in
process (WSGI) and sees the test database: a project with a pool, a protocol and a query the
member holds (an annotator, then the lead), so that generated cases reach past the 404s.
Every check schemathesis has runs (`--checks all`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from accounts.keys import key_digest
from accounts.models import ApiToken, password_stamp
from judging.services import screen_for
from tests.conftest import World

pytestmark = pytest.mark.django_db

SLUG = "acme"  # the project of the `world` fixture
TOKEN = "a" * 40  # the annotator's; schemathesis must know it to check that auth is enforced


def load_schema() -> schemathesis.schemas.BaseSchema:
    document = SchemaGenerator().get_schema(request=None, public=True)
    raw = json.loads(OpenApiJsonRenderer().render(document))
    config = SchemathesisConfig.from_dict(
        {
            "auth": {"openapi": {"tokenAuth": {"api_key": f"Token {TOKEN}"}}},
            "parameters": {"path.slug": SLUG},
            "generation": {"max-examples": 10},
            "operations": [
                {
                    # Schema-valid bodies that are still refused with 400: wrong credentials (DRF's
                    # token view), and an answer's rules that span fields (a grade for "grade",
                    # a note for "skip"), which its description states and JSON Schema cannot;
                    # agreement over a view without double-judged pairs, or of a person who
                    # graded nothing (its description says so).
                    "include-path": [
                        "/api/token/",
                        "/api/projects/{slug}/judgments/",
                        "/api/projects/{slug}/agreement/",
                    ],
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": ["2xx", "400", "401", "403", "404", "409"]
                        }
                    },
                }
            ],
        }
    )
    return schemathesis.openapi.from_dict(raw, config=config)


schema = load_schema()
schema.app = WSGIHandler()  # cases and schemathesis's own probes call the app in process


@pytest.fixture
def app() -> Iterator[None]:
    """Keep the test's database connection across the app's requests (as Django's test client
    does: each request's start and end would otherwise close it)."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)


@pytest.fixture(params=["alice", "lena"], ids=["annotator", "lead"])
def member(request: pytest.FixtureRequest, world: World) -> None:
    """A member signed in by the token schemathesis sends, holding a query of the project's
    pool (items to answer): annotator Alice, or the lead."""
    assert world.project.slug == SLUG
    user = world.alice if request.param == "alice" else world.lead
    screen_for(pool=world.project.pools.get(), user=user)
    ApiToken.objects.create(
        user=user, name="fuzz", digest=key_digest(TOKEN), stamp=password_stamp(user)
    )


@schema.parametrize()
# The data is set up once per operation, not per case: the cases build on one another (a
# claim, answers, undos) as a member's requests would.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
def test_every_operation_keeps_its_contract(
    case: schemathesis.Case, app: None, member: None
) -> None:
    case.call_and_validate()
