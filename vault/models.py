from django.core.validators import RegexValidator
from django.db import models

# A name a job's env can spell inside `${secret:NAME}` and a URL path can
# carry (`DELETE /api/v1/secrets/{name}`).
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"
DEFAULT_PROJECT = "default"


class Secret(models.Model):
    """One secret of one project. Only its ciphertext is stored (Fernet,
    vault.crypto): the database, a backup or a replica alone reveal nothing."""

    project = models.CharField(max_length=100, default=DEFAULT_PROJECT)
    name = models.CharField(
        max_length=100,
        validators=[
            RegexValidator(
                f"^{NAME_PATTERN}$",
                "letters, digits, '_', '-' and '.', starting with a letter or digit",
            )
        ],
    )
    ciphertext = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="secret_project_name"),
        ]
        ordering = ["project", "name"]

    def __str__(self) -> str:
        return self.name if self.project == DEFAULT_PROJECT else f"{self.project}/{self.name}"
