"""Install croniq-runner the way an operator would on a bare machine: a
virtualenv holding requests and the agent modules, and nothing else."""

import base64
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.e2e.processes import ROOT

DIST = "croniq_runner-0.1.0.dist-info"
METADATA = {
    f"{DIST}/METADATA": "Metadata-Version: 2.1\nName: croniq-runner\nVersion: 0.1.0\n"
    "Requires-Dist: requests\n",
    f"{DIST}/WHEEL": "Wheel-Version: 1.0\nGenerator: croniq-tests\nRoot-Is-Purelib: true\n"
    "Tag: py3-none-any\n",
    f"{DIST}/entry_points.txt": "[console_scripts]\ncroniq-runner = runners.agent:main\n",
}


def build_agent_wheel(directory):
    """A wheel of the runners package's agent modules only: what an operator
    would copy to a bare machine."""
    files = {"runners/__init__.py": (ROOT / "runners" / "__init__.py").read_bytes()}
    for path in sorted((ROOT / "runners").glob("agent*.py")):
        files[f"runners/{path.name}"] = path.read_bytes()
    files.update({name: text.encode() for name, text in METADATA.items()})
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{DIST}/RECORD,,")
    files[f"{DIST}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = directory / "croniq_runner-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def bare_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO", "CRONIQ"))}


def run(args, cwd, **kwargs):
    return subprocess.run(
        args, cwd=cwd, env=bare_env(), capture_output=True, text=True, timeout=120, **kwargs
    )


def copy_distribution(name, site_packages):
    """Install an already installed distribution by copying its files (with
    its dist-info), as pip would have laid them out; no network needed."""
    distribution = importlib.metadata.distribution(name)
    for file in distribution.files:
        source = Path(distribution.locate_file(file))
        if file.parts[0] == ".." or "__pycache__" in file.parts or not source.is_file():
            continue
        target = site_packages / file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def bare_venv(tmp_path):
    """A virtualenv with requests and the agent: no Django, no project on the path."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site_packages] = venv.glob("lib/python*/site-packages")
    for name in ("requests", "urllib3", "idna", "charset-normalizer", "certifi"):
        copy_distribution(name, site_packages)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
    wheel = build_agent_wheel(tmp_path)
    installed = run([*pip, "--no-deps", "--no-index", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stderr
    return venv / "bin"
