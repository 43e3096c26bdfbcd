"""Routes of the onPanda API (included under /api/v1/)."""

from django.urls import path

from . import api, session_api

urlpatterns = [
    path("projects/<slug:slug>/annotate/config/", api.ConfigApi.as_view(), name="api-annotate-config"),
    path("projects/<slug:slug>/annotate/import/", api.ImportApi.as_view(), name="api-annotate-import"),
    path("projects/<slug:slug>/annotate/import-panda/", api.ImportPandaApi.as_view(), name="api-annotate-import-panda"),
    path("projects/<slug:slug>/annotate/rollouts/", api.RolloutApi.as_view(), name="api-annotate-rollouts"),
    path("projects/<slug:slug>/annotate/claim/", api.ClaimApi.as_view(), name="api-annotate-claim"),
    path("projects/<slug:slug>/annotate/my-items/", api.MyItemsApi.as_view(), name="api-annotate-my-items"),
    path("projects/<slug:slug>/annotate/queue/", api.QueueApi.as_view(), name="api-annotate-queue"),
    path("projects/<slug:slug>/annotate/claims/<int:claim_id>/<str:action>/", api.ClaimActionApi.as_view(),
         name="api-annotate-claim-action"),
    path("sessions/<int:session_id>/", session_api.SessionApi.as_view(), name="api-session"),
    path("sessions/<int:session_id>/nodes/<int:node_id>/candidates/<int:position>/",
         session_api.CandidatesApi.as_view(), name="api-session-candidates"),
    path("sessions/<int:session_id>/correct/", session_api.CorrectApi.as_view(), name="api-session-correct"),
    path("sessions/<int:session_id>/edit-selection/", session_api.EditSelectionApi.as_view(),
         name="api-session-edit-selection"),
    path("sessions/<int:session_id>/continue-generating/", session_api.ContinueGeneratingApi.as_view(),
         name="api-session-continue-generating"),
    path("sessions/<int:session_id>/tool-calls/", session_api.ToolCallsApi.as_view(), name="api-session-tool-calls"),
    path("sessions/<int:session_id>/new-round/", session_api.NewRoundApi.as_view(), name="api-session-new-round"),
    path("sessions/<int:session_id>/generate-new/", session_api.GenerateNewApi.as_view(),
         name="api-session-generate-new"),
    path("sessions/<int:session_id>/edit-prompt/", session_api.EditPromptApi.as_view(), name="api-session-edit-prompt"),
    path("sessions/<int:session_id>/select/", session_api.SelectNodeApi.as_view(), name="api-session-select"),
    path("sessions/<int:session_id>/nodes/<int:node_id>/stream/", session_api.StreamApi.as_view(),
         name="api-session-stream"),
    path("sessions/<int:session_id>/cancel/", session_api.CancelStreamApi.as_view(), name="api-session-cancel"),
    path("sessions/<int:session_id>/undo/", session_api.UndoApi.as_view(), name="api-session-undo"),
    path("sessions/<int:session_id>/accept/", session_api.AcceptApi.as_view(), name="api-session-accept"),
    path("sessions/<int:session_id>/reject/", session_api.RejectApi.as_view(), name="api-session-reject"),
    path("sessions/<int:session_id>/review/", api.ReviewApi.as_view(), name="api-session-review"),
    path("projects/<slug:slug>/annotate/metrics/", api.MetricsApi.as_view(), name="api-annotate-metrics"),
]
