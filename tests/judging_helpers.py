"""Reading the judging panel the way a browser would: the item shown and its form's keys."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from judging.models import HOLDING, Claim, WorkUnit
from pooling.models import Pair, Pool


def shown_item(html: str) -> Pair | None:
    """The pair on screen (an item is a pair: judgments belong to pairs)."""
    match = re.search(r'data-item="(\d+)"', html)
    if match is None:
        return None
    return Pair.objects.select_related("query", "document").get(pk=int(match.group(1)))


def form_key(html: str, form_id: str = "grade-form") -> str:
    """The idempotency key rendered in one of the panel's forms."""
    start = html.index(f'id="{form_id}"')
    match = re.search(r'name="key" value="([0-9a-f-]{36})"', html[start:])
    assert match, f"no key in #{form_id}"
    return match.group(1)


def undo_key(html: str) -> str:
    return form_key(html, "undo-form")


PANEL = re.compile(r'<section id="judge-panel".*?</section>', re.DOTALL)


def judge_page(client: Client, slug: str) -> str:
    """The judging page as the browser ends up showing it: opening it reads only, and when
    the person holds no query its panel claims one by an htmx POST that swaps it."""
    response = client.get(reverse("judge", args=[slug]))
    assert response.status_code == 200
    page = response.content.decode()
    if 'id="claim-form"' not in page:
        return page
    claimed = client.post(reverse("judge_claim", args=[slug]), headers={"HX-Request": "true"})
    assert claimed.status_code == 200
    panel = PANEL.search(claimed.content.decode())
    assert panel is not None
    return PANEL.sub(lambda _: panel.group(0), page, count=1)


def answer(
    client: Client,
    slug: str,
    html: str,
    grade: int | str | None = None,
    kind: str = "grade",
    note: str = "",
    seconds: float | str = 4.5,
    key: str | None = None,
    status: int = 200,
) -> str:
    """Answer the item shown in `html` as htmx would post it; returns the next panel."""
    item = shown_item(html)
    assert item is not None, "no item on screen"
    data = {"kind": kind, "seconds": str(seconds), "note": note, "key": key or form_key(html)}
    if grade is not None:
        data["grade"] = str(grade)
    response = client.post(
        reverse("judge_submit", args=[slug, item.pk]), data, headers={"HX-Request": "true"}
    )
    assert response.status_code == status, response.content.decode()[:500]
    return response.content.decode()


def undo(client: Client, slug: str, html: str, status: int = 200) -> str:
    response = client.post(
        reverse("judge_undo", args=[slug]), {"key": undo_key(html)}, headers={"HX-Request": "true"}
    )
    assert response.status_code == status, response.content.decode()[:500]
    return response.content.decode()


def fresh_key() -> str:
    return str(uuid.uuid4())


def before_calling(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, action: Callable[[], object]
) -> None:
    """Run `action` once, just before the first call of `module.name`: what another request
    would commit at that very moment."""
    real = getattr(module, name)
    done: list[bool] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            action()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)


def places_out_of_step(pool: Pool) -> dict[int, tuple[int, int]]:
    """Units whose `claims_taken` differs from the claims holding a place on them:
    {unit: (claims_taken, holding claims)}; empty when every count is right."""
    wrong = {}
    for unit in WorkUnit.objects.filter(pool=pool):
        holding = Claim.objects.filter(unit=unit, state__in=HOLDING).count()
        if unit.claims_taken != holding:
            wrong[unit.pk] = (unit.claims_taken, holding)
    return wrong
