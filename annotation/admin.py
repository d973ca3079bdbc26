from __future__ import annotations

from django.contrib import admin

from .models import Document, Membership, Project, ProtocolVersion, Query


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(ProtocolVersion)
class ProtocolVersionAdmin(admin.ModelAdmin):
    list_display = ["project", "number", "created_at"]
    list_filter = ["project"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False  # published versions are immutable; publish a new one instead


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["docid", "title", "project"]
    list_filter = ["project"]
    search_fields = ["docid", "title"]


@admin.register(Query)
class QueryAdmin(admin.ModelAdmin):
    list_display = ["qid", "text", "project"]
    list_filter = ["project"]
    search_fields = ["qid", "text"]
