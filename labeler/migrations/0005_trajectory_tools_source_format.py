from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('labeler', '0004_claim_one_active_per_holder'),
    ]

    operations = [
        migrations.AddField(
            model_name='trajectory',
            name='tools',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='trajectory',
            name='source_format',
            field=models.CharField(default='swe_labeler', max_length=16),
        ),
    ]
