"""Reading the judging panel the way a browser would: the item shown and its form's keys."""

from __future__ import annotations

import re
import uuid

from django.test import Client
from django.urls import reverse

from pooling.models import PoolItem


def shown_item(html: str) -> PoolItem | None:
    match = re.search(r'data-item="(\d+)"', html)
    if match is None:
        return None
    return PoolItem.objects.select_related("query", "document").get(pk=int(match.group(1)))


def form_key(html: str, form_id: str = "grade-form") -> str:
    """The idempotency key rendered in one of the panel's forms."""
    start = html.index(f'id="{form_id}"')
    match = re.search(r'name="key" value="([0-9a-f-]{36})"', html[start:])
    assert match, f"no key in #{form_id}"
    return match.group(1)


def undo_key(html: str) -> str:
    return form_key(html, "undo-form")


def judge_page(client: Client, slug: str) -> str:
    response = client.get(reverse("judge", args=[slug]))
    assert response.status_code == 200
    return response.content.decode()


def answer(
    client: Client,
    slug: str,
    html: str,
    grade: int | str | None = None,
    kind: str = "grade",
    note: str = "",
    seconds: float = 4.5,
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
