"""Keep the tokens made before this release working: DRF's one token per person becomes a
token named "API" here (its key is stored as a digest, bound to the current password). DRF's
table is left as it was, unused."""

from django.contrib.auth.models import User
from django.db import migrations

from accounts.keys import key_digest


def copy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    Person = apps.get_model("auth", "User")
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id, created FROM authtoken_token")
        rows = cursor.fetchall()
    passwords = dict(Person.objects.values_list("pk", "password"))
    ApiToken.objects.bulk_create(
        ApiToken(
            user_id=user_id,
            name="API",
            digest=key_digest(key),
            # The hash the running code compares with (accounts.models.password_stamp).
            stamp=User(password=passwords[user_id]).get_session_auth_hash(),
            created_at=created,
        )
        for key, user_id, created in rows
        if user_id in passwords
    )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_api_token"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(copy_tokens, migrations.RunPython.noop)]
