from csp.constants import UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog, set_language
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from dataplatform.accounts import api as accounts_api
from dataplatform.accounts import urls as accounts_urls
from dataplatform.accounts import views as accounts_views
from dataplatform.audit import urls as audit_urls
from dataplatform.exports import api as exports_api
from dataplatform.exports import views as exports_views
from dataplatform.exports.pull_script import api as pull_script_api
from dataplatform.jobs import api as jobs_api
from dataplatform.jobs import views as jobs_views
from dataplatform.system import api as system_api
from dataplatform.system import views as system_views

api_v1 = [
    path("projects/", accounts_api.ProjectListApi.as_view(), name="api-projects"),
    path("", include(accounts_urls.api_urlpatterns)),
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
    path("exports/pull-script", pull_script_api.PullScriptApi.as_view(), name="api-export-pull-script"),
    path("", include("annotate.api_urls")),
    path("tokens/", accounts_api.TokenListCreateApi.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>/revoke/", accounts_api.TokenRevokeApi.as_view(), name="api-token-revoke"),
    path("system/status/", system_api.SystemStatusApi.as_view(), name="api-system-status"),
    path("system/capabilities/", system_api.SystemCapabilitiesApi.as_view(), name="api-system-capabilities"),
    path("", include("labeler.api_urls")),
    path("", include("corpora.aed.api_urls")),
    path("", include("corpora.atd.api_urls")),
    path("", include(audit_urls.api_urlpatterns)),
]

urlpatterns = [
    path("", accounts_views.project_list, name="project-list"),
    path("accounts/login/", accounts_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("projects/<slug:slug>/", accounts_views.project_detail, name="project-detail"),
    path("", include(accounts_urls.page_urlpatterns)),
    path("projects/<slug:slug>/jobs/", jobs_views.job_create, name="job-create"),
    path("jobs/<int:job_id>/", jobs_views.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/progress/", jobs_views.job_progress, name="job-progress"),
    path("jobs/<int:job_id>/cancel/", jobs_views.job_cancel, name="job-cancel"),
    path("jobs/<int:job_id>/retry/", jobs_views.job_retry, name="job-retry"),
    path("projects/<slug:slug>/exports/", exports_views.export_list, name="export-list"),
    path("projects/<slug:slug>/exports/new", exports_views.export_create, name="export-create"),
    path("projects/<slug:slug>/exports/<int:export_id>/", exports_views.export_detail, name="export-detail"),
    path("projects/<slug:slug>/exports/<int:export_id>/row", exports_views.export_row, name="export-row"),
    path("", include("annotate.page_urls")),
    path("", include("labeler.page_urls")),
    path("", include("corpora.aed.page_urls")),
    path("", include("corpora.atd.page_urls")),
    path("tokens/", accounts_views.token_list, name="token-list"),
    path("tokens/<int:token_id>/revoke/", accounts_views.token_revoke, name="token-revoke"),
    path("system/", system_views.system_page, name="system"),
    path("system/capabilities/", system_views.system_capabilities, name="system-capabilities"),
    path("", include(audit_urls.page_urlpatterns)),
    # The language switch (POST, remembered in a cookie) and the scripts' translations (gettext() in JS).
    path("i18n/setlang/", set_language, name="set-language"),
    path("i18n/catalog.js", JavaScriptCatalog.as_view(), name="javascript-catalog"),
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
