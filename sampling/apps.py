from __future__ import annotations

from django.apps import AppConfig


class SamplingConfig(AppConfig):
    name = "sampling"
    verbose_name = "Search logs, strata and samples"
