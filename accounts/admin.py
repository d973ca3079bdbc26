from __future__ import annotations

from django.contrib import admin

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    # No key to show (only its digest is stored) and no way to make one here: the account page
    # and /api/token/ make tokens and show the key once.
    list_display = ["name", "user", "created_at", "last_used_at"]
    list_filter = ["created_at"]
    search_fields = ["name", "user__username"]
    readonly_fields = ["user", "name", "created_at", "last_used_at"]
    exclude = ["digest", "stamp"]

    def has_add_permission(self, request: object) -> bool:
        return False
