from __future__ import annotations

from django.contrib import admin

from .models import Claim, JudgingPolicy, Judgment, WorkUnit


@admin.register(Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    """Read-only: judgments are append-only, not even an administrator changes one in place."""

    list_display = ["pair", "user", "kind", "grade", "protocol", "seconds_spent", "created_at"]
    list_filter = ["pair__query__project", "kind", "user"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.register(WorkUnit)
class WorkUnitAdmin(admin.ModelAdmin):
    """Read-only: `claims_taken` is kept by compare-and-set updates; edit claims on the
    lead's judging page instead."""

    list_display = [
        "pool",
        "position",
        "query",
        "stratum",
        "judges_needed",
        "claims_taken",
        "gold_for",
    ]
    list_filter = ["pool", "judges_needed"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.register(Claim)
class ClaimAdmin(admin.ModelAdmin):
    list_display = ["unit", "user", "state", "claimed_at", "touched_at", "finished_at"]
    list_filter = ["pool", "state"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False  # release and reassign on the lead's judging page keep the counts right

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.register(JudgingPolicy)
class JudgingPolicyAdmin(admin.ModelAdmin):
    list_display = ["project", "claim_idle_minutes", "double_share", "gold_share"]
