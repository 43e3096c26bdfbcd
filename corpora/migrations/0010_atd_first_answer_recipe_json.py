"""TeacherAnswer.first_of_prompt (a prompt's first ok answer, atd.dpo's pair) and TeacherRun.recipe_json (the run's
recipe as atd.dpo writes it): set by services.ask_teacher from now on; filled here for the answers and runs there
are."""

import json

from django.db import migrations, models
from django.db.models import Exists, OuterRef

BATCH = 2000


def fill(apps, schema_editor):
    TeacherAnswer = apps.get_model("corpora", "TeacherAnswer")
    TeacherRun = apps.get_model("corpora", "TeacherRun")
    ok = TeacherAnswer.objects.filter(status="ok")
    ok.exclude(Exists(ok.filter(prompt_id=OuterRef("prompt_id"), id__lt=OuterRef("id")))).update(first_of_prompt=True)
    last = 0
    while True:  # services.teacher_recipe_json, as it stood when this was written
        page = list(TeacherRun.objects.filter(id__gt=last).order_by("id").select_related("selection")[:BATCH])
        if not page:
            return
        last = page[-1].pk
        for run in page:
            run.recipe_json = json.dumps({**run.selection.recipe, "teacher_mode": run.mode,
                                          "teacher_model": run.model_id}, sort_keys=True)
        TeacherRun.objects.bulk_update(page, ["recipe_json"])


class Migration(migrations.Migration):

    dependencies = [
        ("corpora", "0009_atd_score_logprobs_json"),
    ]

    operations = [
        migrations.AddField(model_name="teacheranswer", name="first_of_prompt",
                            field=models.BooleanField(default=False)),
        migrations.AddField(model_name="teacherrun", name="recipe_json", field=models.TextField(default="{}")),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
