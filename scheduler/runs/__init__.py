"""A run from pending to settled, and the policies that admit it: lifecycle,
overlap, concurrency groups, maintenance windows, chains, outcomes and the
operator actions on runs."""
