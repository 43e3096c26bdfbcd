from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0004_status_i18n'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='error_i18n',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
