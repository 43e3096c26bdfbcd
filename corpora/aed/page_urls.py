"""Routes of the AED (agent error diagnosis) pages and their htmx endpoints."""

from django.urls import path

from .views import curation, dashboard, overview, proposals

urlpatterns = [
    path("projects/<slug:slug>/aed/", overview.overview, name="aed-overview"),
    path("projects/<slug:slug>/aed/import", overview.import_file, name="aed-import"),
    path("projects/<slug:slug>/aed/dashboard/", dashboard.dashboard, name="aed-dashboard"),
    path("projects/<slug:slug>/aed/grading", dashboard.update_grading, name="aed-grading"),
    path("projects/<slug:slug>/aed/traces/<int:trace_id>/", curation.trace_page, name="aed-trace"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/edit", curation.case_edit, name="aed-case-edit"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/submit", curation.case_submit, name="aed-case-submit"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/draft", curation.case_draft, name="aed-case-draft"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/check-evidence", curation.case_check, name="aed-case-check"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/draft/status", curation.case_draft_status,
         name="aed-case-draft-status"),
    path("projects/<slug:slug>/aed/cases/<int:case_id>/proposals", proposals.proposal_add, name="aed-proposal-add"),
    path("projects/<slug:slug>/aed/proposals/<int:proposal_id>/status", proposals.proposal_status,
         name="aed-proposal-status"),
    path("projects/<slug:slug>/aed/proposals/<int:proposal_id>/replay", proposals.replay_start,
         name="aed-replay-start"),
    path("projects/<slug:slug>/aed/replays/<int:replay_id>/", proposals.replay_detail, name="aed-replay"),
]
