"""Routes of the SWE Labeler pages."""

from django.urls import path

from . import views

urlpatterns = [
    path("projects/<slug:slug>/labeler/", views.overview, name="labeler-overview"),
    path("projects/<slug:slug>/labeler/claim", views.claim, name="labeler-claim"),
    path("projects/<slug:slug>/labeler/import", views.import_file, name="labeler-import"),
    path("projects/<slug:slug>/labeler/pin", views.pin_taxonomy, name="labeler-pin"),
    path("projects/<slug:slug>/labeler/settings", views.update_settings, name="labeler-settings"),
    path("projects/<slug:slug>/labeler/autolabel", views.start_autolabel, name="labeler-autolabel"),
    path("projects/<slug:slug>/labeler/tasks/<int:task_id>/", views.task_page, name="labeler-task"),
    path("projects/<slug:slug>/labeler/tasks/<int:task_id>/skip", views.skip, name="labeler-skip"),
    path("projects/<slug:slug>/labeler/labels/<int:label_id>/edit", views.edit_field, name="labeler-edit"),
    path("projects/<slug:slug>/labeler/labels/<int:label_id>/accept", views.accept, name="labeler-accept"),
    path("projects/<slug:slug>/labeler/metrics/", views.metrics_page, name="labeler-metrics"),
]
