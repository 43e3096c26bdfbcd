"""Claims carry their item's project (filled in here), so that a person can hold at most one active claim per queue."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('labeler', '0002_swetask_claims_done_swetask_swe_task_queue_order'),
    ]

    operations = [
        migrations.AddField(
            model_name='reviewclaim',
            name='project',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='accounts.project'),
        ),
        migrations.RunSQL(
            "UPDATE labeler_reviewclaim SET project_id = (SELECT it.project_id FROM labeler_swetask it WHERE it.id = labeler_reviewclaim.task_id)",
            reverse_sql=migrations.RunSQL.noop,
        ),
        # Several tabs could each take an active claim before: keep the newest, release the others.
        migrations.RunSQL(
            "UPDATE labeler_reviewclaim SET state = 'released' WHERE state = 'active' AND EXISTS (SELECT 1 FROM labeler_reviewclaim newer "
            "WHERE newer.project_id = labeler_reviewclaim.project_id AND newer.reviewer_id = labeler_reviewclaim.reviewer_id "
            "AND newer.state = 'active' AND newer.id > labeler_reviewclaim.id)",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
