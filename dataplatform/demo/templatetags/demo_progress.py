"""The home page's progress of a demo that is filling in (demo/filling.html): accounts' page includes the fragment
and never imports the demo, which stands above it (the demo fills a project through jobs)."""

from django import template

from ..parts import seed_jobs_filling

register = template.Library()


@register.simple_tag
def demo_jobs_filling(projects) -> dict:
    """project id -> its demo.seed job while that has not succeeded, for all of `projects` in one query."""
    return seed_jobs_filling(projects)


@register.filter
def demo_job_of(filling: dict, project):
    return filling.get(project.pk)
