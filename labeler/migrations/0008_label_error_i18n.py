from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('labeler', '0007_trajectory_labels'),
    ]

    operations = [
        migrations.AddField(
            model_name='label',
            name='error_i18n',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
