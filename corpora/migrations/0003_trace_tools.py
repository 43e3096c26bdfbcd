from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('corpora', '0002_atd'),
    ]

    operations = [
        migrations.AddField(
            model_name='trace',
            name='tools',
            field=models.JSONField(blank=True, default=list),
        ),
    ]
