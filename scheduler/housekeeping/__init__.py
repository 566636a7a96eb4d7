"""Housekeeping: retention of finished executions and their logs, paced so
it never competes with firing, and PostgreSQL's own clean-up."""
