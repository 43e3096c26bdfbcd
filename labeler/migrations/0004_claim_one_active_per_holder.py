"""One active claim per person and queue. A migration of its own: on PostgreSQL the rows 0003 filled in
leave deferred foreign-key checks pending, and a table with pending checks cannot be altered in the same transaction."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('labeler', '0003_claim_project_one_active_claim'),
    ]

    operations = [
        migrations.AlterField(
            model_name='reviewclaim',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='accounts.project'),
        ),
        migrations.AddConstraint(
            model_name='reviewclaim',
            constraint=models.UniqueConstraint(condition=models.Q(('state', 'active')), fields=('project', 'reviewer'),
                                               name='one_active_review_claim_per_reviewer'),
        ),
    ]
