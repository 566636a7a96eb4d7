"""An execution's output, in chunks as the runner sends them."""

from django.db import models


class LogChunk(models.Model):
    execution = models.ForeignKey(
        "scheduler.Execution", on_delete=models.CASCADE, related_name="log_chunks"
    )
    seq = models.PositiveIntegerField()
    data = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["execution", "seq"]
        constraints = [
            # `seq` makes a retried log append idempotent.
            models.UniqueConstraint(fields=["execution", "seq"], name="logchunk_seq_unique"),
        ]
        indexes = [
            # Log retention: the oldest chunks first (scheduler.retention).
            models.Index(fields=["created_at"], name="logchunk_created"),
        ]

    def __str__(self):
        return f"{self.execution_id}#{self.seq}"


LOG_TRUNCATED_MARKER = "\n[croniq: log truncated at {limit} bytes]\n"
