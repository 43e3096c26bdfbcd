"""Routes of the ATD API (included under /api/v1/)."""

from django.urls import path

from . import api

urlpatterns = [
    path("projects/<slug:slug>/atd/import/", api.AtdImportApi.as_view(), name="api-atd-import"),
    path("projects/<slug:slug>/atd/prompts/", api.AtdPromptListApi.as_view(), name="api-atd-prompts"),
    path("projects/<slug:slug>/atd/runs/", api.AtdRunListApi.as_view(), name="api-atd-runs"),
    path("projects/<slug:slug>/atd/runs/<int:run_id>/", api.AtdRunDetailApi.as_view(), name="api-atd-run"),
    path("projects/<slug:slug>/atd/runs/<int:run_id>/tie-counts/", api.AtdTieCountsApi.as_view(),
         name="api-atd-tie-counts"),
    path("projects/<slug:slug>/atd/selections/", api.AtdSelectionListApi.as_view(), name="api-atd-selections"),
    path("projects/<slug:slug>/atd/selections/<int:selection_id>/teacher/", api.AtdTeacherStartApi.as_view(),
         name="api-atd-teacher"),
    path("projects/<slug:slug>/atd/teacher-runs/<int:teacher_run_id>/", api.AtdTeacherRunApi.as_view(),
         name="api-atd-teacher-run"),
]
