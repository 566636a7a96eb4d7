"""The secrets store (docs/design.md §11): values encrypted at rest, resolved
only into the assignment of the runner that claimed a run."""
