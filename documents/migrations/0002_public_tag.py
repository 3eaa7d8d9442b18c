from django.db import migrations


def create_public_tag(apps, schema_editor):
    Tag = apps.get_model("documents", "Tag")
    Tag.objects.get_or_create(
        tenant_id="default",
        slug="public",
        defaults={"name": "Public", "description": "Readable by every signed-in user of the tenant."},
    )


class Migration(migrations.Migration):
    dependencies = [("documents", "0001_initial")]

    operations = [migrations.RunPython(create_public_tag, migrations.RunPython.noop)]
