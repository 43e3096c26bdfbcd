"""Each label event keeps its label's project (0016 makes it required and indexes it with the event's id): a project's
newest event, the SWE exports' data version, is then read from one index instead of through every label. Two
migrations, two transactions, as 0013/0014: PostgreSQL refuses to alter a table whose rows were just updated while
their deferred foreign-key checks are pending."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_the_labels_project(apps, schema_editor):
    labels = apps.get_model("labeler", "Label").objects.filter(pk=OuterRef("label_id")).values("project_id")
    apps.get_model("labeler", "LabelEvent").objects.update(project_id=Subquery(labels[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_project_trainers_create_exports'),
        ('labeler', '0014_label_project_required'),
    ]

    operations = [
        migrations.AddField(
            model_name='labelevent',
            name='project',
            field=models.ForeignKey(db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name='+', to='accounts.project'),
        ),
        migrations.RunPython(copy_the_labels_project, migrations.RunPython.noop),
    ]
