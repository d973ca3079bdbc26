"""URL map. Every project page lives under /p/<slug>/ and starts with an access helper."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from annotation import views as annotation_views
from annotation import views_sampling
from assay.health import healthz
from evaluation import views as evaluation_views
from judging import views as judging_views
from pooling import views as pooling_views

urlpatterns = [
    path("", annotation_views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("p/<slug:slug>/", annotation_views.project_detail, name="project_detail"),
    path("p/<slug:slug>/judge/", judging_views.judge, name="judge"),
    path("p/<slug:slug>/judge/<int:item_id>/", judging_views.judge_submit, name="judge_submit"),
    path("p/<slug:slug>/pool/", pooling_views.pool_detail, name="pool_detail"),
    path("p/<slug:slug>/pool/new/", pooling_views.pool_create, name="pool_create"),
    path("p/<slug:slug>/qrels/", evaluation_views.qrels_download, name="qrels_download"),
    path("p/<slug:slug>/logs/", views_sampling.log_list, name="log_list"),
    path("p/<slug:slug>/logs/<int:log_id>/", views_sampling.log_detail, name="log_detail"),
    path(
        "p/<slug:slug>/logs/<int:log_id>/sample/",
        views_sampling.sample_create,
        name="sample_create",
    ),
    path(
        "p/<slug:slug>/samples/<int:sample_id>/",
        views_sampling.sample_detail,
        name="sample_detail",
    ),
    path(
        "p/<slug:slug>/samples/<int:sample_id>/accept/",
        views_sampling.sample_accept_view,
        name="sample_accept",
    ),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
]
