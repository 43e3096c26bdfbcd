import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('labeler', '0013_label_project'),
    ]

    operations = [
        migrations.AlterField(
            model_name='label',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='accounts.project'),
        ),
        migrations.AddIndex(
            model_name='label',
            index=models.Index(condition=models.Q(('task__isnull', False)),
                               fields=['project', 'taxonomy', 'origin', 'status', 'task'], name='label_project_tasks'),
        ),
        migrations.AddIndex(
            model_name='label',
            index=models.Index(condition=models.Q(('trajectory__isnull', False)),
                               fields=['project', 'taxonomy', 'origin', 'status', 'trajectory'],
                               name='label_project_trajectories'),
        ),
        migrations.AddIndex(
            model_name='label',
            index=models.Index(condition=models.Q(('task__isnull', False)),
                               fields=['project', 'taxonomy', 'status', 'task'], name='label_project_submitted'),
        ),
    ]
