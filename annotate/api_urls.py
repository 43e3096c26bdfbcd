"""Routes of the onPanda API (included under /api/v1/)."""

from django.urls import path

from . import api

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
    path("sessions/<int:session_id>/", api.SessionApi.as_view(), name="api-session"),
    path("sessions/<int:session_id>/nodes/<int:node_id>/candidates/<int:position>/", api.CandidatesApi.as_view(),
         name="api-session-candidates"),
    path("sessions/<int:session_id>/correct/", api.CorrectApi.as_view(), name="api-session-correct"),
    path("sessions/<int:session_id>/nodes/<int:node_id>/stream/", api.StreamApi.as_view(), name="api-session-stream"),
    path("sessions/<int:session_id>/undo/", api.UndoApi.as_view(), name="api-session-undo"),
    path("sessions/<int:session_id>/accept/", api.AcceptApi.as_view(), name="api-session-accept"),
    path("sessions/<int:session_id>/reject/", api.RejectApi.as_view(), name="api-session-reject"),
    path("sessions/<int:session_id>/review/", api.ReviewApi.as_view(), name="api-session-review"),
    path("projects/<slug:slug>/annotate/metrics/", api.MetricsApi.as_view(), name="api-annotate-metrics"),
]
