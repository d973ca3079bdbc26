"""Assay: build a private retrieval evaluation set and keep it honest."""

from __future__ import annotations

from .celery import app as celery_app

__all__ = ["celery_app"]
