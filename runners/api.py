"""The runner HTTP protocol (DESIGN.md §4)."""

from ninja import Router

runners_router = Router(tags=["runners"])
executions_router = Router(tags=["executions"])
