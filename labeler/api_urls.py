"""Routes of the SWE Labeler API (included under /api/v1/)."""

from django.urls import path

from . import api

urlpatterns = [
    path("taxonomies/", api.TaxonomyListApi.as_view(), name="api-taxonomies"),
    path("taxonomies/<int:taxonomy_id>/", api.TaxonomyDetailApi.as_view(), name="api-taxonomy"),
    path("projects/<slug:slug>/labeler/settings/", api.SettingsApi.as_view(), name="api-labeler-settings"),
    path("projects/<slug:slug>/labeler/taxonomy/", api.TaxonomyUploadApi.as_view(), name="api-labeler-taxonomy"),
    path("projects/<slug:slug>/labeler/import/", api.ImportApi.as_view(), name="api-labeler-import"),
    path("projects/<slug:slug>/labeler/autolabel/", api.AutolabelApi.as_view(), name="api-labeler-autolabel"),
    path("projects/<slug:slug>/labeler/tasks/", api.TaskListApi.as_view(), name="api-labeler-tasks"),
    path("projects/<slug:slug>/labeler/tasks/<int:task_id>/", api.TaskDetailApi.as_view(), name="api-labeler-task"),
    path("projects/<slug:slug>/labeler/claim/", api.ClaimApi.as_view(), name="api-labeler-claim"),
    path("projects/<slug:slug>/labeler/claims/<int:claim_id>/<str:action>/", api.ClaimActionApi.as_view(),
         name="api-labeler-claim-action"),
    path("projects/<slug:slug>/labeler/trajectories/", api.TrajectoryListApi.as_view(),
         name="api-labeler-trajectories"),
    path("projects/<slug:slug>/labeler/trajectories/<int:trajectory_id>/", api.TrajectoryDetailApi.as_view(),
         name="api-labeler-trajectory"),
    path("projects/<slug:slug>/labeler/trajectories/claim/", api.TrajectoryClaimApi.as_view(),
         name="api-labeler-trajectory-claim"),
    path("projects/<slug:slug>/labeler/trajectories/claims/<int:trajectory_claim_id>/<str:action>/",
         api.TrajectoryClaimActionApi.as_view(), name="api-labeler-trajectory-claim-action"),
    path("projects/<slug:slug>/labeler/queue/", api.QueueApi.as_view(), name="api-labeler-queue"),
    path("projects/<slug:slug>/labeler/metrics/", api.MetricsApi.as_view(), name="api-labeler-metrics"),
    path("labels/<int:label_id>/", api.LabelApi.as_view(), name="api-label"),
    path("labels/<int:label_id>/submit/", api.LabelSubmitApi.as_view(), name="api-label-submit"),
]
