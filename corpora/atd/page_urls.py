"""Routes of the ATD (near-tie prompts) page and its htmx / form endpoints."""

from django.urls import path

from . import views

urlpatterns = [
    path("projects/<slug:slug>/atd/", views.overview, name="atd-overview"),
    path("projects/<slug:slug>/atd/import", views.import_file, name="atd-import"),
    path("projects/<slug:slug>/atd/score", views.score, name="atd-score"),
    path("projects/<slug:slug>/atd/runs/<int:run_id>/tie-counts", views.tie_counts, name="atd-tie-counts"),
    path("projects/<slug:slug>/atd/freeze", views.freeze, name="atd-freeze"),
    path("projects/<slug:slug>/atd/selections/<int:selection_id>/teacher", views.teacher, name="atd-teacher"),
]
