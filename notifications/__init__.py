"""Notifications: channels, rules and the delivery outbox (docs/design.md §9)."""
