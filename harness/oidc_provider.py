"""A real OpenID provider for single sign-on's end-to-end tests: the Node
script tests/sso/provider/server.mjs (oidc-provider, pinned by its
package-lock.json), installed with `npm ci` into a cache directory the
first time, then started as a process beside Croniq's server.

`python -m harness.oidc_provider` installs it ahead of the tests (CI).
"""

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import requests

from harness.processes import ROOT, Process, free_port

SOURCE = ROOT / "tests" / "sso" / "provider"
FILES = ("package.json", "package-lock.json", "server.mjs")
CLIENT_ID, CLIENT_SECRET = "croniq", "croniq-test-client-secret"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("CRONIQ_TEST_NODE_CACHE") or Path(base) / "croniq-tests")


def missing_node() -> str | None:
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            return f"{tool} not found (install Node.js 20 or later with npm)"
    return None


def install() -> Path:
    """The directory holding the provider and its node_modules: one per
    package-lock.json, so a changed pin installs afresh. `npm ci` into a
    temporary directory renamed into place: a failed or concurrent install
    leaves no half-made one."""
    lock = (SOURCE / "package-lock.json").read_bytes()
    home = cache_root() / f"oidc-provider-{hashlib.sha256(lock).hexdigest()[:16]}"
    if not (home / "node_modules" / "oidc-provider").is_dir():
        home.parent.mkdir(parents=True, exist_ok=True)
        building = home.with_name(f"{home.name}.{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        for name in FILES[:2]:
            shutil.copy(SOURCE / name, building / name)
        result = subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=building,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            raise RuntimeError(f"npm ci failed:\n{result.stdout}\n{result.stderr}")
        try:
            building.rename(home)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(building, ignore_errors=True)
    # The script is the checkout's: copied at each start, so an edit counts.
    shutil.copy(SOURCE / "server.mjs", home / "server.mjs")
    return home


class OIDCProvider(Process):
    """oidc-provider on 127.0.0.1, one client redirecting to `redirect_uri`;
    each user's claims come from `accounts` (set_accounts changes them)."""

    def __init__(self, redirect_uri: str, accounts: dict, log_path: Path, port: int | None = None):
        home = install()
        self.port = port or free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.accounts_file = Path(log_path).with_suffix(".accounts.json")
        self.set_accounts(accounts)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", ""),
            "PORT": str(self.port),
            "ISSUER": self.issuer,
            "CLIENT_ID": CLIENT_ID,
            "CLIENT_SECRET": CLIENT_SECRET,
            "REDIRECT_URI": redirect_uri,
            "ACCOUNTS_FILE": str(self.accounts_file),
        }
        node = shutil.which("node") or "node"
        super().__init__([node, str(home / "server.mjs")], env, log_path)

    def set_accounts(self, accounts: dict) -> None:
        self.accounts_file.write_text(json.dumps(accounts))

    def wait_ready(self, timeout: float = 30) -> "OIDCProvider":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                self.kill()
                raise RuntimeError(f"the OpenID provider exited:\n{self.output()}")
            try:
                discovery = requests.get(
                    self.issuer + "/.well-known/openid-configuration", timeout=5
                )
                if discovery.status_code == 200:
                    return self
            except requests.RequestException:
                pass  # not listening yet
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"the OpenID provider not ready after {timeout}s:\n{self.output()}")


if __name__ == "__main__":
    print(install())
