"""Where a result was measured: the machine, the package versions and the commit (recorded with every result)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

from rlft.core.errors import InvalidInputError
from rlft.core.seeding import threads_setting

PACKAGES = ("rlft", "torch", "transformers", "trl", "peft", "datasets", "gymnasium", "minari", "stable-baselines3",
            "numpy", "sb3-contrib", "mujoco", "gguf")
# what a result is made of: a commit is "+dirty" when these differ from it, not when results or the README that
# renders them do, nor the docs pages (recording a result must not mark the next one dirty)
NOT_CODE = (":(exclude)results", ":(exclude)README.md", ":(exclude)docs")


def cpu_model() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, object]:
    """The machine as results record it: CPU model and core count, the threads a process used, GPU if any."""
    info: dict[str, object] = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "arch": platform.machine(),
        "os": platform.system(),
        "python": platform.python_version(),
        "threads": (threads_setting(os.environ.get("RLFT_NUM_THREADS"))
                    or threads_setting(os.environ.get("OMP_NUM_THREADS"))),
    }
    import sys

    torch = sys.modules.get("torch")  # only when this process used it: importing torch costs seconds
    if torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def machine_line(info: dict) -> str:
    """``2-core x86_64 CPU (Intel Xeon ...), 1 thread`` or the GPU."""
    if info.get("gpu"):
        return f"GPU {info['gpu']} ({info.get('cores')}-core host)"
    threads = info.get("threads")
    text = f"{info.get('cores')}-core {info.get('arch')} CPU ({info.get('cpu')})"
    return text + (f", {threads} thread{'s' if threads != 1 else ''}" if threads else "")


def versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that decide a result (from metadata: nothing is imported)."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_commit(cwd: str | os.PathLike | None = None) -> str | None:
    """The checked-out commit (with ``+dirty`` when tracked files other than results/ and the README changed), or
    None outside a git checkout.

    ``RLFT_SOURCE_COMMIT`` wins when set: a copy of the tree run elsewhere (a GPU machine's copy) may carry no
    ``.git`` or a stale one (seen: the copy's HEAD was the session's first commit, shown ``+dirty``), so the one
    who copied it says which commit it is."""
    copied = os.environ.get("RLFT_SOURCE_COMMIT", "").strip()
    if copied:
        # a commit's hash and nothing else: a CI's repository URL there carried its job token into results/ (pass 17)
        if not re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?", copied):
            raise InvalidInputError("RLFT_SOURCE_COMMIT is not a commit hash (7 to 40 hex digits, +dirty allowed); "
                                    "its value is not shown, as it may hold a credential",
                                    hint="set it to the copied tree's commit: git rev-parse --short=12 HEAD")
        return f"{copied} (copied tree)"
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE], cwd=cwd,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def environment() -> dict[str, object]:
    """Everything a result records about where it came from."""
    return {"machine": machine(), "versions": versions(), "commit": git_commit()}
