from __future__ import annotations

from django.apps import AppConfig


class JudgingConfig(AppConfig):
    name = "judging"
