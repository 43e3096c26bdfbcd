"""Routes of the AED (agent error diagnosis) pages and their htmx endpoints."""

from django.urls import path

from . import views

urlpatterns = [
    path("projects/<slug:slug>/aed/", views.overview, name="aed-overview"),
    path("projects/<slug:slug>/aed/import", views.import_file, name="aed-import"),
    path("projects/<slug:slug>/aed/dashboard/", views.dashboard, name="aed-dashboard"),
    path("projects/<slug:slug>/aed/traces/<int:trace_id>/", views.trace_page, name="aed-trace"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/edit", views.case_edit, name="aed-case-edit"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/submit", views.case_submit, name="aed-case-submit"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/draft", views.case_draft, name="aed-case-draft"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/draft/status", views.case_draft_status,
         name="aed-case-draft-status"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/proposals", views.proposal_add, name="aed-proposal-add"),
    path("projects/<slug:slug>/aed/proposals/<int:proposal_id>/status", views.proposal_status,
         name="aed-proposal-status"),
    path("projects/<slug:slug>/aed/proposals/<int:proposal_id>/replay", views.replay_start, name="aed-replay-start"),
    path("projects/<slug:slug>/aed/replays/<int:replay_id>/", views.replay_detail, name="aed-replay"),
]
