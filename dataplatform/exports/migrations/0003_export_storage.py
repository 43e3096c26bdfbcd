from django.conf import settings
from django.db import migrations, models


def written_to_the_configured_storage(apps, schema_editor):
    """Exports from before the field were written to the storage configured then: the one configured now, unless an
    operator switched since, which stranded them already."""
    Export = apps.get_model("exports", "Export")
    alias = getattr(settings, "EXPORTS_STORAGE_ALIAS", "exports-files")
    if alias != "exports-files":
        Export.objects.update(storage=alias)


class Migration(migrations.Migration):

    dependencies = [
        ("exports", "0002_stored_rows"),
    ]

    operations = [
        migrations.AddField(
            model_name="export",
            name="storage",
            field=models.CharField(default="exports-files", max_length=64),
        ),
        migrations.RunPython(written_to_the_configured_storage, migrations.RunPython.noop),
    ]
