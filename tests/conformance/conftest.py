import sys

from harness.processes import ROOT

# Until the runner distribution is installed, its source folder is the path.
RUNNER_SOURCE = str(ROOT / "runner")
if RUNNER_SOURCE not in sys.path:
    sys.path.insert(0, RUNNER_SOURCE)
