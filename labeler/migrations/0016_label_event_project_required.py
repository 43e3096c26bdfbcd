import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('labeler', '0015_label_event_project'),
    ]

    operations = [
        migrations.AlterField(
            model_name='labelevent',
            name='project',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='accounts.project'),
        ),
        migrations.AddIndex(
            model_name='labelevent',
            index=models.Index(fields=['project', 'id'], name='label_event_project_id'),
        ),
    ]
