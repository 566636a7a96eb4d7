"""Firing and the loop: the loop and its steps, the fire step, the wake-ups
that end its sleep, and the other ways an occurrence is created (triggers,
backfill, run on all)."""
