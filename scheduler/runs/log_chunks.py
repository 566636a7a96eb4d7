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
            # Log retention: the oldest chunks first (scheduler.housekeeping.retention).
            models.Index(fields=["created_at"], name="logchunk_created"),
        ]

    def __str__(self) -> str:
        return f"{self.execution_id}#{self.seq}"


LOG_TRUNCATED_MARKER = "\n[croniq: log truncated at {limit} bytes]\n"


def read_log(execution_id: int, offset: int) -> tuple[str, int]:
    """(text, end): the execution's stored log from byte `offset` (of its
    UTF-8 encoding, the truncation marker included) to its end, and the
    byte offset of that end. ValueError when `offset` lies past the end."""
    chunks = LogChunk.objects.filter(execution_id=execution_id).order_by("seq")
    position, parts = 0, []
    for data in chunks.values_list("data", flat=True).iterator(chunk_size=200):
        encoded = data.encode("utf-8")
        if position + len(encoded) > offset:
            parts.append(encoded[max(0, offset - position) :])
        position += len(encoded)
    if offset > position:
        raise ValueError(f"beyond the end of the log ({position} bytes)")
    # An offset inside a character (not one this call answered) shows as U+FFFD.
    return b"".join(parts).decode("utf-8", "replace"), position
