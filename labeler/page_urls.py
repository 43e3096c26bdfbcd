"""Routes of the SWE Labeler pages."""

from django.urls import path

from .views import metrics, overview, review

urlpatterns = [
    path("projects/<slug:slug>/labeler/", overview.overview, name="labeler-overview"),
    path("projects/<slug:slug>/labeler/claim", review.claim, name="labeler-claim"),
    path("projects/<slug:slug>/labeler/import", overview.import_file, name="labeler-import"),
    path("projects/<slug:slug>/labeler/pin", overview.pin_taxonomy, name="labeler-pin"),
    path("projects/<slug:slug>/labeler/taxonomy", overview.upload_taxonomy, name="labeler-taxonomy-upload"),
    path("projects/<slug:slug>/labeler/settings", overview.update_settings, name="labeler-settings"),
    path("projects/<slug:slug>/labeler/autolabel", overview.start_autolabel, name="labeler-autolabel"),
    path("projects/<slug:slug>/labeler/tasks/<int:task_id>/", review.task_page, name="labeler-task"),
    path("projects/<slug:slug>/labeler/tasks/<int:task_id>/skip", review.skip, name="labeler-skip"),
    path("projects/<slug:slug>/labeler/trajectories/claim", review.claim_trajectory, name="labeler-claim-trajectory"),
    path("projects/<slug:slug>/labeler/trajectories/<int:trajectory_id>/", review.trajectory_page,
         name="labeler-trajectory"),
    path("projects/<slug:slug>/labeler/trajectories/<int:trajectory_id>/skip", review.skip_trajectory,
         name="labeler-skip-trajectory"),
    path("projects/<slug:slug>/labeler/labels/<int:label_id>/edit", review.edit_field, name="labeler-edit"),
    path("projects/<slug:slug>/labeler/labels/<int:label_id>/accept", review.accept, name="labeler-accept"),
    path("projects/<slug:slug>/labeler/metrics/", metrics.metrics_page, name="labeler-metrics"),
    path("projects/<slug:slug>/labeler/metrics/compare", metrics.compare_versions, name="labeler-compare"),
]
