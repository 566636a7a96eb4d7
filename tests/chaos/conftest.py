from tests.runner_venv import runner_from_wheel  # noqa: F401 (every agent runs from the wheel)
