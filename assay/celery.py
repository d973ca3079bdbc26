"""The Celery application. Without CELERY_BROKER_URL tasks run eagerly (see settings)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assay.settings.base")

app = Celery("assay")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
