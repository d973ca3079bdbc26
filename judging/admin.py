from __future__ import annotations

from django.contrib import admin

from .models import Judgment


@admin.register(Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    """Read-only: judgments are never changed in place, not even by an administrator."""

    list_display = ["pool_item", "user", "grade", "protocol", "seconds_spent", "created_at"]
    list_filter = ["pool_item__pool__project", "user"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
