"""Ping retention: each check keeps its last CRONIQ_CHECK_PINGS_KEPT pings
(docs/design.md §6; 100 unless set otherwise), as healthchecks keeps a check's
last N; a loop step prunes the older ones (`ChecksConfig.loop_steps`).

Pings are numbered per check (`Ping.n`, from the check's `n_pings`), so a
check's old pings are one range delete on the `ping_check_n` index, and a
check with nothing to prune is known from its own row (`pruned_through`)
without counting its pings.
"""

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F

from checks.models import Check, Ping

# Checks pruned in one pass; the rest at the next (5 s later, as the pass
# found work).
BATCH = 100


def kept() -> int:
    return settings.CRONIQ_CHECK_PINGS_KEPT


def prune(now: datetime) -> int:
    """Delete pings beyond each check's last `kept()`; returns how many
    checks were pruned. (`now` is the loop's: retention by count needs none.)"""
    keep = kept()
    due = Check.objects.filter(n_pings__gt=F("pruned_through") + keep)
    pruned = 0
    for pk, n_pings in due.values_list("pk", "n_pings")[:BATCH]:
        through = n_pings - keep
        with transaction.atomic():
            Ping.objects.filter(subject_id=pk, n__lte=through).delete()
            Check.objects.filter(pk=pk).update(pruned_through=through)
        pruned += 1
    return pruned
