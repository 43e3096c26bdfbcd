"""Score.logprobs_json: a score's logprobs as atd.scored writes them, made with the score from now on; filled here
for the scores there are."""

import json

from django.db import migrations, models

BATCH = 2000


def fill(apps, schema_editor):
    Score = apps.get_model("corpora", "Score")
    last = 0
    while True:
        page = list(Score.objects.filter(id__gt=last).order_by("id").only("id", "logprobs")[:BATCH])
        if not page:
            return
        last = page[-1].pk
        for score in page:
            score.logprobs_json = json.dumps(score.logprobs, sort_keys=True)
        Score.objects.bulk_update(page, ["logprobs_json"])


class Migration(migrations.Migration):

    dependencies = [
        ("corpora", "0008_aed_recovery_mode"),
    ]

    operations = [
        migrations.AddField(model_name="score", name="logprobs_json", field=models.TextField(default="{}")),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
