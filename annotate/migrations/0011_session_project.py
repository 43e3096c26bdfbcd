"""Each session keeps its item's project (0012 makes it required and indexes it by project, status and id): a
project's latest accepted sessions (the review page, the metrics) are read by one index instead of through every
project's items. Two migrations, two transactions: PostgreSQL refuses to alter a table whose rows were just updated
while their deferred foreign-key checks are pending."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_the_items_project(apps, schema_editor):
    Session, Item = apps.get_model("annotate", "Session"), apps.get_model("annotate", "Item")
    Session.objects.update(project_id=Subquery(Item.objects.filter(pk=OuterRef("item_id")).values("project_id")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_project_trainers_create_exports'),
        ('annotate', '0010_claim_indexes_by_project'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='project',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='accounts.project'),
        ),
        migrations.RunPython(copy_the_items_project, migrations.RunPython.noop),
    ]
