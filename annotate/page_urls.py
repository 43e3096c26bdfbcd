"""Routes of the onPanda pages: the queue, imports, rollouts, settings, review, metrics and the workspace."""

from django.urls import path

from . import views

urlpatterns = [
    path("projects/<slug:slug>/annotate/", views.queue_page, name="annotate-queue"),
    path("projects/<slug:slug>/annotate/claim", views.claim, name="annotate-claim"),
    path("projects/<slug:slug>/annotate/import", views.import_prompts, name="annotate-import"),
    path("projects/<slug:slug>/annotate/import-panda", views.import_panda, name="annotate-import-panda"),
    path("projects/<slug:slug>/annotate/rollouts", views.start_rollouts, name="annotate-rollouts"),
    path("projects/<slug:slug>/annotate/config", views.update_config, name="annotate-config"),
    path("projects/<slug:slug>/annotate/claims/<int:claim_id>/reassign", views.reassign_claim,
         name="annotate-reassign"),
    path("projects/<slug:slug>/annotate/review/", views.review_page, name="annotate-review"),
    path("projects/<slug:slug>/annotate/metrics/", views.metrics_page, name="annotate-metrics"),
    path("annotate/sessions/<int:session_id>/", views.workspace, name="annotate-workspace"),
    path("annotate/sessions/<int:session_id>/review", views.review_session, name="annotate-review-session"),
]
