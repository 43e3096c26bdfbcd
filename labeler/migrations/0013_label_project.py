"""Each label keeps its item's project (0014 makes it required and indexes it): a project's labels are read by
indexes that begin with the project (the lists' state and field filters) instead of through the items of every
project that shares the taxonomy. Two migrations, two transactions, as annotate's 0011/0012: PostgreSQL refuses to
alter a table whose rows were just updated while their deferred foreign-key checks are pending."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_the_items_project(apps, schema_editor):
    Label = apps.get_model("labeler", "Label")
    for field, model in (("task", "SweTask"), ("trajectory", "Trajectory")):
        items = apps.get_model("labeler", model).objects.filter(pk=OuterRef(f"{field}_id")).values("project_id")
        Label.objects.filter(**{f"{field}__isnull": False}).update(project_id=Subquery(items[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_project_trainers_create_exports'),
        ('labeler', '0012_list_filter_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='label',
            name='project',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='accounts.project'),
        ),
        migrations.RunPython(copy_the_items_project, migrations.RunPython.noop),
    ]
