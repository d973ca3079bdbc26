"""URL map. Every project page lives under /p/<slug>/ and starts with an access helper."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import IsAuthenticated

from accounts import api as accounts_api
from accounts import views as accounts_views
from agreement import api as agreement_api
from agreement import views as agreement_views
from agreement import views_adjudication as adjudication_views
from agreement import views_gold
from annotation import views as annotation_views
from annotation import views_protocol as protocol_views
from assay.health import healthz
from evaluation import api_compare as evaluation_api_compare
from evaluation import api_llm as evaluation_api_llm
from evaluation import views as evaluation_views
from evaluation import views_board as board_views
from evaluation import views_compare as compare_views
from evaluation import views_inspect as inspect_views
from evaluation import views_llm as llm_views
from evaluation import views_release as release_views
from jobs import views as jobs_views
from judging import api as judging_api
from judging import views as judging_views
from judging import views_lead as judging_lead_views
from judging import views_project
from pooling import views as pooling_views
from pooling import views_data as pooling_data_views
from pooling import views_runs as runs_views
from sampling import views as sampling_views

# JSON for /api/ paths no API view answered (a slug that is not a slug), HTML pages elsewhere.
handler400 = "assay.api.bad_request"
handler403 = "assay.api.permission_denied"
handler404 = "assay.api.not_found"
handler500 = "assay.api.server_error"

urlpatterns = [
    path("", annotation_views.home, name="home"),
    path("projects/new/", annotation_views.project_new, name="project_new"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", accounts_views.account, name="account"),
    path(
        "accounts/welcome/<str:uidb64>/<str:token>/",
        accounts_views.welcome,
        name="account_welcome",
    ),
    path("accounts/tokens/", accounts_views.token_new, name="token_new"),
    path(
        "accounts/tokens/<int:pk>/revoke/",
        accounts_views.token_revoke_view,
        name="token_revoke",
    ),
    path(
        "accounts/password/",
        auth_views.PasswordChangeView.as_view(),
        name="password_change",
    ),
    path(
        "accounts/password/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("p/<slug:slug>/", views_project.project_detail, name="project_detail"),
    path("p/<slug:slug>/judge/", judging_views.judge, name="judge"),
    path("p/<slug:slug>/judge/<int:item_id>/", judging_views.judge_submit, name="judge_submit"),
    path("p/<slug:slug>/judge/claim/", judging_views.judge_claim, name="judge_claim"),
    path("p/<slug:slug>/judge/undo/", judging_views.judge_undo, name="judge_undo"),
    path("p/<slug:slug>/judge/release/", judging_views.judge_release, name="judge_release"),
    path(
        "p/<slug:slug>/judge/acknowledge/<int:number>/",
        judging_views.judge_acknowledge,
        name="judge_acknowledge",
    ),
    path("p/<slug:slug>/judging/", judging_lead_views.judging_overview, name="judging_overview"),
    path(
        "p/<slug:slug>/judging/queries/<int:unit_id>/",
        judging_lead_views.unit_detail,
        name="judging_unit",
    ),
    path(
        "p/<slug:slug>/judging/pairs/<int:pair_id>/",
        judging_lead_views.pair_history_view,
        name="judging_item",
    ),
    path(
        "p/<slug:slug>/judging/claims/<int:claim_id>/release/",
        judging_lead_views.claim_release_view,
        name="judging_claim_release",
    ),
    path(
        "p/<slug:slug>/judging/claims/<int:claim_id>/reassign/",
        judging_lead_views.claim_reassign_view,
        name="judging_claim_reassign",
    ),
    path(
        "p/<slug:slug>/judging/members/", judging_lead_views.member_add, name="judging_member_add"
    ),
    path(
        "p/<slug:slug>/judging/members/<int:user_id>/link/",
        judging_lead_views.member_link,
        name="judging_member_link",
    ),
    path("p/<slug:slug>/judging/policy/", judging_lead_views.policy_save, name="judging_policy"),
    path("p/<slug:slug>/gold/", views_gold.gold_items, name="gold_items"),
    path("p/<slug:slug>/gold/share/", views_gold.gold_share_view, name="gold_share"),
    path("p/<slug:slug>/gold/<int:pair_id>/mark/", views_gold.gold_mark_view, name="gold_mark"),
    path(
        "p/<slug:slug>/gold/<int:pair_id>/retire/",
        views_gold.gold_retire_view,
        name="gold_retire",
    ),
    path("p/<slug:slug>/agreement/", agreement_views.agreement_page, name="agreement_dashboard"),
    path(
        "p/<slug:slug>/agreement/noise/",
        evaluation_views.agreement_noise,
        name="agreement_noise",
    ),
    path(
        "p/<slug:slug>/agreement/settings/",
        agreement_views.settings_save,
        name="agreement_settings",
    ),
    path("p/<slug:slug>/judges/", llm_views.judges_page, name="llm_judges"),
    # before <name>/: a judge cannot be called "settings" (the add form refuses the name)
    path("p/<slug:slug>/judges/settings/", llm_views.judge_settings, name="llm_judge_settings"),
    path("p/<slug:slug>/judges/<slug:name>/", llm_views.judge_detail, name="llm_judge_detail"),
    path(
        "p/<slug:slug>/judges/<slug:name>/calibration/",
        llm_views.judge_calibration,
        name="llm_judge_calibration",
    ),
    path(
        "p/<slug:slug>/judges/<slug:name>/calibrate/",
        llm_views.judge_calibrate,
        name="llm_judge_calibrate",
    ),
    path("p/<slug:slug>/judges/<slug:name>/label/", llm_views.judge_label, name="llm_judge_label"),
    path(
        "p/<slug:slug>/judges/<slug:name>/prefilter/",
        llm_views.judge_prefilter,
        name="llm_judge_prefilter",
    ),
    path(
        "p/<slug:slug>/releases/<int:number>/compare/",
        compare_views.compare_page,
        name="compare",
    ),
    path(
        "p/<slug:slug>/must-never-break/",
        compare_views.must_never_break_page,
        name="must_never_break",
    ),
    path(
        "p/<slug:slug>/must-never-break/<int:case_id>/remove/",
        compare_views.must_never_break_remove_view,
        name="must_never_break_remove",
    ),
    path(
        "p/<slug:slug>/must-never-break/download/",
        compare_views.must_never_break_download,
        name="must_never_break_download",
    ),
    path("p/<slug:slug>/protocol/", protocol_views.protocol_detail, name="protocol_detail"),
    path("p/<slug:slug>/protocol/diff/", protocol_views.protocol_diff_view, name="protocol_diff"),
    path("p/<slug:slug>/protocol/edit/", protocol_views.protocol_edit, name="protocol_edit"),
    path("p/<slug:slug>/data/", pooling_data_views.data_page, name="project_data"),
    path("p/<slug:slug>/pool/", pooling_views.pool_detail, name="pool_detail"),
    path("p/<slug:slug>/pool/preview/", judging_lead_views.pool_preview, name="pool_preview"),
    path("p/<slug:slug>/pool/new/", judging_lead_views.pool_create, name="pool_create"),
    path("p/<slug:slug>/pool/<int:pool_id>/", pooling_views.pool_view, name="pool_view"),
    path("p/<slug:slug>/pool/runs/upload/", runs_views.runs_upload, name="runs_upload"),
    path("p/<slug:slug>/pool/runs/baselines/", runs_views.baselines_start, name="runs_baselines"),
    path("p/<slug:slug>/pool/runs/status/", runs_views.runs_status, name="runs_status"),
    path("p/<slug:slug>/queries/download/", runs_views.queries_download, name="queries_download"),
    path("p/<slug:slug>/qrels/", evaluation_views.qrels_download, name="qrels_download"),
    path("p/<slug:slug>/releases/", release_views.releases, name="releases"),
    # before <int:number>/: "history" is no number, but keep the fixed paths first
    path(
        "p/<slug:slug>/releases/history/",
        release_views.release_history_view,
        name="release_history",
    ),
    path(
        "p/<slug:slug>/releases/<int:number>/",
        release_views.release_detail,
        name="release_detail",
    ),
    path(
        "p/<slug:slug>/releases/<int:number>/download/<str:kind>/",
        release_views.release_download,
        name="release_download",
    ),
    path(
        "p/<slug:slug>/releases/<int:number>/diff/",
        release_views.release_diff_view,
        name="release_diff",
    ),
    path(
        "p/<slug:slug>/releases/<int:number>/rescore/",
        release_views.release_rescore_view,
        name="release_rescore",
    ),
    path(
        "p/<slug:slug>/releases/<int:number>/scoreboard/",
        board_views.scoreboard,
        name="scoreboard",
    ),
    path(
        "p/<slug:slug>/releases/<int:number>/inspect/<int:run_id>/",
        inspect_views.inspector,
        name="inspector",
    ),
    path("p/<slug:slug>/adjudicate/", adjudication_views.adjudicate_queue, name="adjudicate_queue"),
    path(
        "p/<slug:slug>/adjudicate/<int:pair_id>/",
        adjudication_views.adjudicate_pair,
        name="adjudicate_pair",
    ),
    path(
        "p/<slug:slug>/adjudications/<int:adjudication_id>/promote/",
        adjudication_views.adjudication_promote_view,
        name="adjudication_promote",
    ),
    path("p/<slug:slug>/jobs/<int:job_id>/retry/", jobs_views.job_retry_view, name="job_retry"),
    path("p/<slug:slug>/jobs/<int:job_id>/cancel/", jobs_views.job_cancel_view, name="job_cancel"),
    path(
        "p/<slug:slug>/jobs/<int:job_id>/discard/", jobs_views.job_discard_view, name="job_discard"
    ),
    path("p/<slug:slug>/logs/", sampling_views.log_list, name="log_list"),
    path("p/<slug:slug>/logs/<int:log_id>/", sampling_views.log_detail, name="log_detail"),
    path(
        "p/<slug:slug>/logs/<int:log_id>/sample/",
        sampling_views.sample_create,
        name="sample_create",
    ),
    path(
        "p/<slug:slug>/samples/<int:sample_id>/",
        sampling_views.sample_detail,
        name="sample_detail",
    ),
    path(
        "p/<slug:slug>/samples/<int:sample_id>/accept/",
        sampling_views.sample_accept_view,
        name="sample_accept",
    ),
    # Signed-in users only, as documented (drf-spectacular serves it to anyone by default).
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]),
        name="api_schema",
    ),
    path("api/token/", accounts_api.TokenCreateView.as_view(), name="api_token"),
    path("api/tokens/", accounts_api.TokenListView.as_view(), name="api_tokens"),
    path("api/tokens/<int:pk>/", accounts_api.TokenDetailView.as_view(), name="api_token_detail"),
    path("api/projects/<slug:slug>/queue/", judging_api.QueueView.as_view(), name="api_queue"),
    path("api/projects/<slug:slug>/next/", judging_api.NextView.as_view(), name="api_next"),
    path(
        "api/projects/<slug:slug>/judgments/",
        judging_api.JudgmentCreateView.as_view(),
        name="api_judgments",
    ),
    path(
        "api/projects/<slug:slug>/judges/<slug:name>/",
        evaluation_api_llm.JudgeStatusView.as_view(),
        name="api_llm_judge",
    ),
    path(
        "api/projects/<slug:slug>/judges/<slug:name>/calibration/",
        evaluation_api_llm.JudgeCalibrationView.as_view(),
        name="api_llm_judge_calibration",
    ),
    path(
        "api/projects/<slug:slug>/judges/<slug:name>/label/",
        evaluation_api_llm.JudgeLabelView.as_view(),
        name="api_llm_judge_label",
    ),
    path(
        "api/projects/<slug:slug>/releases/<int:number>/compare/",
        evaluation_api_compare.CompareView.as_view(),
        name="api_compare",
    ),
    path(
        "api/projects/<slug:slug>/agreement/",
        agreement_api.AgreementView.as_view(),
        name="api_agreement",
    ),
    path(
        "api/projects/<slug:slug>/protocol/ack/",
        judging_api.ProtocolAckView.as_view(),
        name="api_protocol_ack",
    ),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
]
