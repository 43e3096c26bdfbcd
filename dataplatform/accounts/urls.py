"""Routes of a project's members, license and settings (the API's and the project page's forms). The older accounts
routes (projects, tokens, log-in) are still listed in the root URLconf."""

from django.urls import path

from . import api, views

# <path:username>: a username may hold a "/" where accounts come from elsewhere (SSO, imports) than Django's
# own forms, whose validator refuses it; reverse() percent-encodes the rest.
api_urlpatterns = [
    path("projects/<slug:slug>/settings/", api.ProjectSettingsApi.as_view(), name="api-project-settings"),
    path("projects/<slug:slug>/members/", api.ProjectMembersApi.as_view(), name="api-project-members"),
    path("projects/<slug:slug>/members/<path:username>/", api.ProjectMemberApi.as_view(), name="api-project-member"),
]

page_urlpatterns = [
    path("projects/new", views.project_create, name="project-create"),
    path("projects/<slug:slug>/members/add", views.member_add, name="project-member-add"),
    path("projects/<slug:slug>/members/<path:username>/role", views.member_role, name="project-member-role"),
    path("projects/<slug:slug>/members/<path:username>/remove", views.member_remove, name="project-member-remove"),
    path("projects/<slug:slug>/license", views.project_license, name="project-license"),
    path("projects/<slug:slug>/settings", views.project_settings, name="project-settings"),
]
