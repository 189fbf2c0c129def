"""The client installer: skips without npm, fails loudly when npm fails, installs once per pin.

A stand-in ``npm`` on PATH plays the registry, so these run without node or a network.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import _npm

FAKE = _npm.Client("@acme/fake-agent", "1.2.3", "fake-agent")


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(body if body.startswith("#!") else "#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setenv("HARNESS_E2E_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HARNESS_E2E_OPTIONAL", raising=False)
    return folder


# a working npm (PATH holds only the stand-ins, so it is Python, not shell): creates
# node_modules/.bin/<binary> under --prefix and counts its runs
GOOD_NPM = f"""#!{sys.executable}
import pathlib, sys
prefix = pathlib.Path(sys.argv[sys.argv.index("--prefix") + 1])
with open(pathlib.Path(sys.argv[0]).with_name("npm-runs"), "a") as runs:
    runs.write("run\\n")
(prefix / "node_modules" / ".bin").mkdir(parents=True)
(prefix / "node_modules" / ".bin" / "fake-agent").write_text("#!/bin/sh\\n")
"""


def test_no_npm_skips_saying_why(bin_dir: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match="node/npm not on PATH"):
        _npm.install(FAKE)


def test_installs_once_into_the_cache_and_reuses_it(bin_dir: Path, tmp_path: Path) -> None:
    _tool(bin_dir, "node", "exit 0\n")
    _tool(bin_dir, "npm", GOOD_NPM)

    first = _npm.install(FAKE)
    second = _npm.install(FAKE)

    assert (
        first
        == second
        == (tmp_path / "cache" / "acme+fake-agent@1.2.3" / "node_modules" / ".bin" / "fake-agent")
    )
    assert (bin_dir / "npm-runs").read_text().count("run") == 1
    assert (first.parents[2] / _npm.MARKER).read_text() == "@acme/fake-agent@1.2.3\n"


def test_a_half_done_install_is_redone(bin_dir: Path, tmp_path: Path) -> None:
    _tool(bin_dir, "node", "exit 0\n")
    _tool(bin_dir, "npm", GOOD_NPM)
    stale = tmp_path / "cache" / "acme+fake-agent@1.2.3" / "node_modules" / "leftover"
    stale.mkdir(parents=True)

    binary = _npm.install(FAKE)

    assert binary.exists() and not stale.exists()


def test_a_failed_install_fails_with_npm_stderr(bin_dir: Path) -> None:
    _tool(bin_dir, "node", "exit 0\n")
    _tool(bin_dir, "npm", "echo 'npm error 404 Not Found - @acme/fake-agent' >&2\nexit 1\n")

    with pytest.raises(pytest.fail.Exception) as failed:
        _npm.install(FAKE)

    assert "npm install @acme/fake-agent@1.2.3 failed" in str(failed.value)
    assert "npm error 404 Not Found" in str(failed.value)


def test_optional_turns_a_failed_install_into_a_skip(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tool(bin_dir, "node", "exit 0\n")
    _tool(bin_dir, "npm", "echo 'network down' >&2\nexit 1\n")
    monkeypatch.setenv("HARNESS_E2E_OPTIONAL", "1")

    with pytest.raises(pytest.skip.Exception, match="network down"):
        _npm.install(FAKE)


def test_the_default_cache_is_the_real_users_not_the_tests_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HARNESS_E2E_CACHE", raising=False)
    assert not str(_npm.cache_root()).startswith(os.environ["HOME"])
    assert _npm.cache_root().parts[-3:] == (".cache", "harness-console", "e2e")


def test_two_processes_at_once_install_once(bin_dir: Path, tmp_path: Path) -> None:
    """The second process waits on the lock while the first installs, then reuses it."""
    _tool(bin_dir, "node", "exit 0\n")
    slow = GOOD_NPM.replace("import pathlib, sys", "import pathlib, sys, time\ntime.sleep(0.5)")
    _tool(bin_dir, "npm", slow)
    code = "from tests.e2e import _npm, test_npm; print(_npm.install(test_npm.FAKE))"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    racers = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [racer.communicate(timeout=60)[0].strip() for racer in racers]

    assert [racer.returncode for racer in racers] == [0, 0]
    assert outputs[0] == outputs[1] and outputs[0].endswith("/.bin/fake-agent")
    assert (bin_dir / "npm-runs").read_text().count("run") == 1
