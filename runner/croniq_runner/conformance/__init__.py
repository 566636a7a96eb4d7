"""A wire-level conformance suite for the runner protocol (docs/design.md §4).

The cases are data (`cases/*.json`, described in README.md beside this
module), so a runner or server written in any language can replay them;
`python -m croniq_runner.conformance --server URL --token T` replays them
against a live server. Standard library and requests only.
"""
