from __future__ import annotations

from django.apps import AppConfig


class AgreementConfig(AppConfig):
    name = "agreement"
