"""The view-side lookups shared by the judging pages, the lead pages and the API."""

from __future__ import annotations

from django.http import Http404

from annotation.access import Access
from pooling.models import Pool

from .services import current_pool


def pool_or_404(access: Access) -> Pool:
    """The project's current pool; 404 (not 500) while the project has none yet."""
    pool = current_pool(access.project)
    if pool is None:
        raise Http404("this project has no pool yet")
    return pool
