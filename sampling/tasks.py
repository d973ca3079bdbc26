"""Celery tasks of sampling: thin wrappers that take ids and call one service."""

from __future__ import annotations

from celery import shared_task

from .services import log_ingest


@shared_task(acks_late=True)
def log_ingest_task(log_id: int) -> str:
    """Ingest an uploaded log; idempotent (a log already done is left alone)."""
    return str(log_ingest(log_id=log_id).status)
