"""What every Croniq app stands on and none owns: the ownership of managed
rows, database-vendor code and the process's one wake-up listener, text the
database can store, the admin kit and permissions. It imports no Croniq app
(docs/design.md §1)."""
