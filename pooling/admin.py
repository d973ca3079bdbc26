from __future__ import annotations

from django.contrib import admin

from .models import Pool, Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "source", "created_at"]
    list_filter = ["project"]


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ["pk", "project", "depth", "scope", "added", "to_judge", "created_at"]
    list_filter = ["project"]
