from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo project: the one place that drives every app at once (import, pool, judge),
    so it sits above them all and no app imports it."""

    name = "demo"
    verbose_name = "Demo project"
