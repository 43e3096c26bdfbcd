"""Claims carry their item's project (filled in here), so that a person can hold at most one active claim per queue."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('annotate', '0002_item_claims_done_item_item_queue_order'),
    ]

    operations = [
        migrations.AddField(
            model_name='claim',
            name='project',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='accounts.project'),
        ),
        migrations.RunSQL(
            "UPDATE annotate_claim SET project_id = (SELECT it.project_id FROM annotate_item it WHERE it.id = annotate_claim.item_id)",
            reverse_sql=migrations.RunSQL.noop,
        ),
        # Several tabs could each take an active claim before: keep the newest, release the others.
        migrations.RunSQL(
            "UPDATE annotate_claim SET state = 'released' WHERE state = 'active' AND EXISTS (SELECT 1 FROM annotate_claim newer "
            "WHERE newer.project_id = annotate_claim.project_id AND newer.annotator_id = annotate_claim.annotator_id "
            "AND newer.state = 'active' AND newer.id > annotate_claim.id)",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
