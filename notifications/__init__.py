"""Notifications: channels, rules and the delivery outbox (DESIGN.md §9)."""
