"""Jobs as code: `apply` reads a document, checks every item, and writes
the whole plan in one transaction (docs/design.md §5)."""
