from csp.constants import UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotate import api as annotate_api
from annotate import views as annotate_views
from dataplatform.accounts import api as accounts_api
from dataplatform.accounts import views as accounts_views
from dataplatform.audit import urls as audit_urls
from dataplatform.exports import api as exports_api
from dataplatform.exports import views as exports_views
from dataplatform.jobs import api as jobs_api
from dataplatform.jobs import views as jobs_views
from dataplatform.system import api as system_api
from dataplatform.system import views as system_views

api_v1 = [
    path("projects/", accounts_api.ProjectListApi.as_view(), name="api-projects"),
    path("projects/<slug:slug>/jobs/", jobs_api.ProjectJobsApi.as_view(), name="api-project-jobs"),
    path("jobs/<int:job_id>/", jobs_api.JobDetailApi.as_view(), name="api-job-detail"),
    path("jobs/<int:job_id>/cancel/", jobs_api.JobCancelApi.as_view(), name="api-job-cancel"),
    path("jobs/<int:job_id>/retry/", jobs_api.JobRetryApi.as_view(), name="api-job-retry"),
    path("projects/<slug:slug>/exports/", exports_api.ProjectExportsApi.as_view(), name="api-project-exports"),
    path("projects/<slug:slug>/exports/<int:export_id>/", exports_api.ExportDetailApi.as_view(), name="api-export"),
    path("projects/<slug:slug>/exports/<int:export_id>/manifest", exports_api.ExportManifestApi.as_view(),
         name="api-export-manifest"),
    path("projects/<slug:slug>/exports/<int:export_id>/shards/<str:name>", exports_api.ExportShardApi.as_view(),
         name="api-export-shard"),
    path("export-kinds/", exports_api.ExportKindsApi.as_view(), name="api-export-kinds"),
    path("projects/<slug:slug>/annotate/config/", annotate_api.ConfigApi.as_view(), name="api-annotate-config"),
    path("projects/<slug:slug>/annotate/import/", annotate_api.ImportApi.as_view(), name="api-annotate-import"),
    path("projects/<slug:slug>/annotate/import-panda/", annotate_api.ImportPandaApi.as_view(),
         name="api-annotate-import-panda"),
    path("projects/<slug:slug>/annotate/rollouts/", annotate_api.RolloutApi.as_view(), name="api-annotate-rollouts"),
    path("projects/<slug:slug>/annotate/claim/", annotate_api.ClaimApi.as_view(), name="api-annotate-claim"),
    path("projects/<slug:slug>/annotate/my-items/", annotate_api.MyItemsApi.as_view(), name="api-annotate-my-items"),
    path("projects/<slug:slug>/annotate/queue/", annotate_api.QueueApi.as_view(), name="api-annotate-queue"),
    path("projects/<slug:slug>/annotate/claims/<int:claim_id>/<str:action>/", annotate_api.ClaimActionApi.as_view(),
         name="api-annotate-claim-action"),
    path("sessions/<int:session_id>/", annotate_api.SessionApi.as_view(), name="api-session"),
    path("sessions/<int:session_id>/nodes/<int:node_id>/candidates/<int:position>/",
         annotate_api.CandidatesApi.as_view(), name="api-session-candidates"),
    path("sessions/<int:session_id>/correct/", annotate_api.CorrectApi.as_view(), name="api-session-correct"),
    path("sessions/<int:session_id>/nodes/<int:node_id>/stream/", annotate_api.StreamApi.as_view(),
         name="api-session-stream"),
    path("sessions/<int:session_id>/undo/", annotate_api.UndoApi.as_view(), name="api-session-undo"),
    path("sessions/<int:session_id>/accept/", annotate_api.AcceptApi.as_view(), name="api-session-accept"),
    path("sessions/<int:session_id>/reject/", annotate_api.RejectApi.as_view(), name="api-session-reject"),
    path("sessions/<int:session_id>/review/", annotate_api.ReviewApi.as_view(), name="api-session-review"),
    path("projects/<slug:slug>/annotate/metrics/", annotate_api.MetricsApi.as_view(), name="api-annotate-metrics"),
    path("tokens/", accounts_api.TokenListCreateApi.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>/revoke/", accounts_api.TokenRevokeApi.as_view(), name="api-token-revoke"),
    path("system/status/", system_api.SystemStatusApi.as_view(), name="api-system-status"),
    path("", include("labeler.api_urls")),
    path("", include("corpora.api_urls")),
    path("", include("corpora.atd.api_urls")),
    path("", include(audit_urls.api_urlpatterns)),
]

urlpatterns = [
    path("", accounts_views.project_list, name="project-list"),
    path("accounts/login/", accounts_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("projects/<slug:slug>/", accounts_views.project_detail, name="project-detail"),
    path("projects/<slug:slug>/jobs/", jobs_views.job_create, name="job-create"),
    path("jobs/<int:job_id>/", jobs_views.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/progress/", jobs_views.job_progress, name="job-progress"),
    path("jobs/<int:job_id>/cancel/", jobs_views.job_cancel, name="job-cancel"),
    path("jobs/<int:job_id>/retry/", jobs_views.job_retry, name="job-retry"),
    path("projects/<slug:slug>/exports/", exports_views.export_list, name="export-list"),
    path("projects/<slug:slug>/exports/new", exports_views.export_create, name="export-create"),
    path("projects/<slug:slug>/exports/<int:export_id>/", exports_views.export_detail, name="export-detail"),
    path("projects/<slug:slug>/exports/<int:export_id>/row", exports_views.export_row, name="export-row"),
    path("projects/<slug:slug>/annotate/", annotate_views.queue_page, name="annotate-queue"),
    path("projects/<slug:slug>/annotate/claim", annotate_views.claim, name="annotate-claim"),
    path("projects/<slug:slug>/annotate/import", annotate_views.import_prompts, name="annotate-import"),
    path("projects/<slug:slug>/annotate/import-panda", annotate_views.import_panda, name="annotate-import-panda"),
    path("projects/<slug:slug>/annotate/rollouts", annotate_views.start_rollouts, name="annotate-rollouts"),
    path("projects/<slug:slug>/annotate/config", annotate_views.update_config, name="annotate-config"),
    path("projects/<slug:slug>/annotate/claims/<int:claim_id>/reassign", annotate_views.reassign_claim,
         name="annotate-reassign"),
    path("projects/<slug:slug>/annotate/review/", annotate_views.review_page, name="annotate-review"),
    path("projects/<slug:slug>/annotate/metrics/", annotate_views.metrics_page, name="annotate-metrics"),
    path("annotate/sessions/<int:session_id>/", annotate_views.workspace, name="annotate-workspace"),
    path("annotate/sessions/<int:session_id>/review", annotate_views.review_session, name="annotate-review-session"),
    path("", include("labeler.page_urls")),
    path("", include("corpora.page_urls")),
    path("", include("corpora.atd.page_urls")),
    path("tokens/", accounts_views.token_list, name="token-list"),
    path("tokens/<int:token_id>/revoke/", accounts_views.token_revoke, name="token-revoke"),
    path("system/", system_views.system_page, name="system"),
    path("", include(audit_urls.page_urlpatterns)),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI sets inline style attributes; only this page allows them (it shows no user data).
    path("api/docs/", csp_update({"style-src": [UNSAFE_INLINE]})(SpectacularSwaggerSplitView.as_view(url_name="schema")),
         name="swagger-ui"),
]

# Under /api/ errors are JSON, elsewhere HTML (dataplatform/errors.py).
handler400 = "dataplatform.errors.bad_request"
handler404 = "dataplatform.errors.not_found"
handler500 = "dataplatform.errors.server_error"
