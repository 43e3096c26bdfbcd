"""Routes of the AED API (included under /api/v1/)."""

from django.urls import path

from . import api

urlpatterns = [
    path("projects/<slug:slug>/aed/import/", api.ImportApi.as_view(), name="api-aed-import"),
    path("projects/<slug:slug>/aed/traces/", api.TraceListApi.as_view(), name="api-aed-traces"),
    path("projects/<slug:slug>/aed/traces/<int:trace_id>/", api.TraceDetailApi.as_view(), name="api-aed-trace"),
    path("projects/<slug:slug>/aed/traces/<int:trace_id>/case/", api.TraceCaseApi.as_view(), name="api-aed-trace-case"),
    path("projects/<slug:slug>/aed/summary/", api.SummaryApi.as_view(), name="api-aed-summary"),
    path("projects/<slug:slug>/aed/grading/", api.GradingApi.as_view(), name="api-aed-grading"),
    path("aed/cases/<int:case_id>/", api.CaseApi.as_view(), name="api-aed-case"),
    path("aed/cases/<int:case_id>/submit/", api.CaseSubmitApi.as_view(), name="api-aed-case-submit"),
    path("aed/cases/<int:case_id>/draft/", api.CaseDraftApi.as_view(), name="api-aed-case-draft"),
    path("aed/cases/<int:case_id>/check-evidence/", api.CaseCheckEvidenceApi.as_view(), name="api-aed-case-check"),
    path("aed/cases/<int:case_id>/proposals/", api.ProposalListApi.as_view(), name="api-aed-proposals"),
    path("aed/proposals/<int:proposal_id>/status/", api.ProposalStatusApi.as_view(), name="api-aed-proposal-status"),
    path("aed/proposals/<int:proposal_id>/replays/", api.ReplayCreateApi.as_view(), name="api-aed-replays"),
    path("aed/replays/<int:replay_id>/", api.ReplayApi.as_view(), name="api-aed-replay"),
]
