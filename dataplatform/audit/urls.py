from django.urls import path

from . import api, views

api_urlpatterns = [
    path("audit/", api.AuditEventListApi.as_view(), name="api-audit"),
]

page_urlpatterns = [
    path("audit/", views.audit_log, name="audit-log"),
]
