"""The unit files in ``systemd/`` are valid, and the worker template parses its instance.

- ``systemd-analyze verify`` accepts every unit without a warning (skipped when
  it is not installed). It checks that ExecStart binaries exist, so each unit is
  verified as a copy whose ``/opt/queue-engine/venv/bin/`` is this virtualenv's
  bin folder; the template is verified as an instance,
  ``queue-claim-worker@load.cbr:1.service`` (passed as ``FILE:NAME``, since a
  ':' in the argument is verify's alias separator).
- The template's ExecStart, expanded the way systemd does (``%i``, ``%%``,
  ``$$``), run with ``sh``: instance ``load.cbr:1`` starts the worker with
  ``--queue=load.cbr``, and the optional per-queue env file is loaded.
- The settings the deployment depends on are present: ``Type=notify``, a
  watchdog, ``Restart=always`` (workers: ``on-failure``), no restart loop on exit 2, a stop timeout longer
  than the worker's shutdown grace.
- The GPU drop-in (``queue-claim-worker@.service.d/gpu.conf.example``) undoes
  ``PrivateDevices=yes`` and lets the NVIDIA devices through, checked on the
  merged unit by parsing (always) and by ``systemd-analyze verify`` of the
  template with the drop-in installed (when it is available).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parent.parent.parent / "systemd"
INSTALLED_BIN = "/opt/queue-engine/venv/bin/"
VENV_BIN = str(Path(sys.executable).parent) + "/"
SERVICES = ["queue-orchestrator.service", "queue-scheduler.service", "queue-claim-worker@.service"]
GPU_DROPIN = UNITS / "queue-claim-worker@.service.d" / "gpu.conf.example"


def unit_text(name: str) -> str:
    return (UNITS / name).read_text()


def directives(name: str) -> dict[str, list[str]]:
    """``key -> [values]`` of a unit file (comments and sections ignored)."""
    found: dict[str, list[str]] = {}
    for line in unit_text(name).splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found


def sectioned(*texts: str) -> dict[tuple[str, str], list[str]]:
    """``(section, key) -> [values]`` of a unit followed by its drop-ins, in reading order.

    systemd reads the unit, then each drop-in: for a single-valued setting the
    last assignment wins, so ``merged[...][-1]`` is the effective value.
    """
    found: dict[tuple[str, str], list[str]] = {}
    for text in texts:
        section = ""
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            found.setdefault((section, key.strip()), []).append(value.strip())
    return found


def expand(value: str, instance: str) -> str:
    """systemd's specifier expansion (``%i``, ``%%``) then ``$$`` -> ``$``, as at exec time."""

    def specifier(match: re.Match[str]) -> str:
        char = match.group(1)
        if char == "%":
            return "%"
        if char == "i":
            return instance
        raise AssertionError(f"unexpected specifier %{char} in {value!r}")

    return re.sub(r"%(.)", specifier, value).replace("$$", "$")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.parametrize("unit", SERVICES)
def test_systemd_analyze_verify_accepts_the_unit(unit: str, tmp_path: Path) -> None:
    copy = tmp_path / unit
    copy.write_text(unit_text(unit).replace(INSTALLED_BIN, VENV_BIN))
    target = (
        f"{copy}:queue-claim-worker@load.cbr:1.service" if unit.endswith("@.service") else str(copy)
    )
    proc = subprocess.run(
        ["systemd-analyze", "verify", target],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    # Unknown keys and bad values are only warnings: none is allowed.
    assert proc.stderr.strip() == "" and proc.stdout.strip() == "", proc.stderr + proc.stdout


@pytest.mark.parametrize(
    ("instance", "queue"),
    [
        ("load.cbr:1", "load.cbr"),
        ("load.cbr:12", "load.cbr"),
        ("load.cbr", "load.cbr"),
        ("a:b:3", "a:b"),
    ],
)
def test_worker_instance_names_the_queue(instance: str, queue: str, tmp_path: Path) -> None:
    [exec_start] = directives("queue-claim-worker@.service")["ExecStart"]
    fake = tmp_path / "bin" / "queue-claim-worker"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" "pid=$$" "app=${QUEUE_ENGINE_APP:-}"\n')
    fake.chmod(0o755)
    etc = tmp_path / "etc"
    (etc / "queues").mkdir(parents=True)
    (etc / "queues" / f"{queue}.env").write_text(
        "# per-queue settings\nQUEUE_ENGINE_APP=myapp.tasks\nQUEUE_ENGINE_PREFETCH='2'\n"
    )
    line = expand(exec_start, instance)
    line = line.replace(INSTALLED_BIN, f"{fake.parent}/").replace("/etc/queue-engine/", f"{etc}/")
    argv = shlex.split(line)
    assert argv[:2] == ["/bin/sh", "-c"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == f"--queue={queue}"
    assert out[2] == "app=myapp.tasks"  # the per-queue file was loaded (and exported)

    # Without a per-queue file the worker still starts (the file is optional).
    (etc / "queues" / f"{queue}.env").unlink()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"--queue={queue}"
    assert proc.stdout.splitlines()[2] == "app="


def test_exec_keeps_the_worker_as_the_main_process(tmp_path: Path) -> None:
    # Type=notify accepts notifications from the main PID only: the shell must exec.
    [exec_start] = directives("queue-claim-worker@.service")["ExecStart"]
    fake = tmp_path / "queue-claim-worker"
    fake.write_text('#!/bin/sh\necho "$$"\n')
    fake.chmod(0o755)
    argv = shlex.split(expand(exec_start, "q:1").replace(INSTALLED_BIN, f"{tmp_path}/"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={})
    out, _ = proc.communicate(timeout=30)
    assert int(out.strip()) == proc.pid


@pytest.mark.parametrize("unit", SERVICES)
def test_units_restart_notify_and_run_unprivileged(unit: str) -> None:
    d = directives(unit)
    assert d["Type"] == ["notify"]
    # A worker's exit 0 is an operator's `queue-ctl stop`: on-failure leaves it stopped.
    assert d["Restart"] == (["on-failure"] if unit.startswith("queue-claim-worker") else ["always"])
    assert "2" in d["RestartPreventExitStatus"][0].split()  # config error: no restart loop
    assert d["WatchdogSec"] and d["User"] == ["queue-engine"]
    assert "/etc/queue-engine/queue-engine.env" in d["EnvironmentFile"]
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices"):
        assert d[key] == ["yes"], key
    assert d["ProtectSystem"] == ["strict"]
    assert d["KillSignal"] == ["SIGTERM"]


def _restarts(unit: str, code: int) -> tuple[bool, bool]:
    """``(restarted, counted as a success)`` for exit ``code``, by systemd's rules.

    ``Restart=on-failure`` restarts on an exit that is not clean (non-zero
    and not in ``SuccessExitStatus``); ``RestartPreventExitStatus`` prevents
    a restart and ``RestartForceExitStatus`` forces one, whatever ``Restart=``.
    """
    d = directives(unit)

    def listed(key: str) -> set[int]:
        return {int(v) for value in d.get(key, []) for v in value.split() if v.isdigit()}

    success = code == 0 or code in listed("SuccessExitStatus")
    [restart] = d["Restart"]
    restarted = restart == "always" or (restart == "on-failure" and not success)
    if code in listed("RestartPreventExitStatus"):
        restarted = False
    if code in listed("RestartForceExitStatus"):
        restarted = True
    return restarted, success


def test_the_worker_unit_restarts_on_every_exit_code_but_a_stop_and_a_usage_error() -> None:
    from queue_engine.foundation.exit_codes import ExitCode

    unit = "queue-claim-worker@.service"
    assert _restarts(unit, ExitCode.OK) == (False, True)  # SIGTERM, queue-ctl stop
    assert _restarts(unit, ExitCode.USAGE) == (False, False)  # fix the settings first
    # A recycle (--max-jobs, --max-rss, --max-age) is restarted and is no failure.
    assert _restarts(unit, ExitCode.RECYCLE) == (True, True)
    for code in ExitCode:
        if code not in (ExitCode.OK, ExitCode.USAGE):
            assert _restarts(unit, code)[0], f"exit {int(code)} ({code.name}) is not restarted"


def test_worker_stop_timeout_exceeds_the_shutdown_grace() -> None:
    from queue_engine.worker import settings

    grace = getattr(settings, "SHUTDOWN_GRACE_DEFAULT_S", 30.0)
    [timeout] = directives("queue-claim-worker@.service")["TimeoutStopSec"]
    assert timeout.endswith("s") and float(timeout[:-1]) > float(grace) + 10


def test_gpu_dropin_gives_the_worker_the_nvidia_devices() -> None:
    base = sectioned(unit_text("queue-claim-worker@.service"))
    assert base[("Service", "PrivateDevices")] == ["yes"]  # why the drop-in exists
    dropin = sectioned(GPU_DROPIN.read_text())
    assert "yes" not in dropin[("Service", "PrivateDevices")]
    merged = sectioned(unit_text("queue-claim-worker@.service"), GPU_DROPIN.read_text())
    assert merged[("Service", "PrivateDevices")][-1] == "no"
    # Only the listed devices (plus the standard pseudo devices) get through.
    assert merged[("Service", "DevicePolicy")][-1] == "closed"
    allowed = {v.split()[0]: v.split()[1] for v in merged[("Service", "DeviceAllow")]}
    assert allowed["char-nvidia-frontend"] == "rw"  # /dev/nvidia0..N, nvidiactl
    assert allowed["char-nvidia-uvm"] == "rw"  # CUDA unified memory
    # The rest of the hardening stays.
    for key in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp"):
        assert len(merged[("Service", key)]) == 1, key
    assert dropin[("Unit", "After")] == ["nvidia-persistenced.service"]
    # systemd reads *.conf only: the shipped file must be copied to apply.
    assert not GPU_DROPIN.name.endswith(".conf")


def _verify_with_dropin(tmp_path: Path, dropin_text: str) -> subprocess.CompletedProcess[str]:
    unit = "queue-claim-worker@.service"
    (tmp_path / unit).write_text(unit_text(unit).replace(INSTALLED_BIN, VENV_BIN))
    folder = tmp_path / f"{unit}.d"
    folder.mkdir(exist_ok=True)
    (folder / "gpu.conf").write_text(dropin_text)
    return subprocess.run(
        ["systemd-analyze", "verify", f"{tmp_path / unit}:queue-claim-worker@train:1.service"],
        capture_output=True,
        text=True,
        timeout=60,
        # Drop-ins are looked up on the unit path: put the copy's folder first.
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_UNIT_PATH": f"{tmp_path}:"},
    )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_gpu_dropin(tmp_path: Path) -> None:
    # The check must see the drop-in: a broken copy of it is reported.
    broken = _verify_with_dropin(tmp_path, GPU_DROPIN.read_text() + "PrivateDevices=maybe\n")
    assert "gpu.conf" in broken.stderr, broken.stderr
    proc = _verify_with_dropin(tmp_path, GPU_DROPIN.read_text())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "" and proc.stdout.strip() == "", proc.stderr + proc.stdout
