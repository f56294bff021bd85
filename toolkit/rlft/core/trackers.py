"""Experiment trackers for the stages whose loop is rlft's own (``train bc``, ``train offline``): what ``report_to``
does for the TRL stages. ``tensorboard`` writes event files; ``wandb`` and ``trackio`` log through their own
libraries when installed (a one-line install hint otherwise). Several at once: ``--report-to tensorboard,wandb``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from rlft.core.errors import InvalidInputError, require

TRACKERS = ("none", "tensorboard", "wandb", "trackio")


def parse_report_to(value: str | list[str] | None) -> list[str]:
    """``"tensorboard,wandb"`` (or a list) -> checked names; ``none`` -> []."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    names = [n.strip().lower() for n in items if n and n.strip()]
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise InvalidInputError(f"--report-to: unknown tracker {', '.join(unknown)}", hint=f"use {', '.join(TRACKERS)}")
    if "wandb" in names and importlib.util.find_spec("wandb") is not None:  # not installed: the install hint later
        check_wandb_login()
    return [n for n in dict.fromkeys(names) if n != "none"]


# the module each of transformers' trackers needs, where its report_to name is not the module's name
_TRACKER_MODULES = {"azure_ml": "azureml", "flyte": "flytekit", "kubeflow": "kfp"}


def check_trainer_trackers(value: str | list[str] | None) -> None:
    """``report_to`` of the TRL stages, before anything is written: every name one transformers knows and whose
    package is installed (transformers refuses either only while it builds the trainer, as a traceback)."""
    import importlib.util

    try:
        from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
    except ImportError:  # pragma: no cover - another transformers layout: it checks the names itself
        return
    names = [value] if isinstance(value, str) else list(value or [])
    for name in (str(n).strip() for n in names):
        if name in ("all", "none", ""):
            continue
        if name not in INTEGRATION_TO_CALLBACK:
            raise InvalidInputError(f"--report-to: {name!r} is not a tracker transformers knows",
                                    hint=f"use {', '.join(INTEGRATION_TO_CALLBACK)} (several: a,b), or none")
        module = _TRACKER_MODULES.get(name, name)
        if importlib.util.find_spec(module) is None:
            raise InvalidInputError(f"--report-to {name}: the {module} package is not installed",
                                    hint=f"pip install {module.replace('_', '-')}, or leave {name} out")
        if name == "wandb":
            check_wandb_login()


WANDB_LOGIN_HINT = "run `wandb login`, set WANDB_API_KEY, or log offline with WANDB_MODE=offline"


def check_wandb_login() -> None:
    """W&B has credentials, or logs offline, or may ask for them: without any, ``wandb.init`` raised its UsageError as
    a traceback once training had begun, leaving a run folder behind (hostile pass 18, B3)."""
    import os

    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun") or _interactive():
        return
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return
    # wandb's own .netrc reader (what wandb.init falls back to); not its session lookup, which sets up W&B's
    # process-wide settings before the run does (a later offline run in the same process then asked for a key)
    try:
        from wandb.sdk.lib.wbauth import wbnetrc
        from wandb.sdk.lib.wbauth.host_url import HostUrl

        found = wbnetrc.read_netrc_auth_with_source(host=HostUrl(os.environ.get("WANDB_BASE_URL",
                                                                                  "https://api.wandb.ai")))
    except (ImportError, AttributeError, TypeError):  # another wandb: not checked here
        return
    except Exception as exc:  # a .netrc wandb cannot read
        raise InvalidInputError(f"--report-to wandb: {str(exc).strip()[:200]}", hint=WANDB_LOGIN_HINT) from exc
    if found is None:
        raise InvalidInputError("--report-to wandb: W&B has no API key here and cannot ask for one",
                                hint=WANDB_LOGIN_HINT)


def _interactive() -> bool:
    """A terminal W&B can ask for its key on (a closed or missing stdin is none)."""
    try:
        return bool(sys.stdin and sys.stdin.isatty())
    except (ValueError, OSError):
        return False


class Trackers:
    """Open every named tracker, log to all of them, close them."""

    def __init__(self, names: list[str], logdir: Path, run_name: str, config: dict[str, Any]):
        self.names, self._writers = names, []
        for name in names:
            if name == "tensorboard":
                from torch.utils.tensorboard import SummaryWriter

                writer = SummaryWriter(log_dir=str(logdir))
                self._writers.append(("tensorboard", writer))
            else:
                module = require(name, package=name)
                run = module.init(project="rlft", name=run_name, config=config,
                                  **({"dir": str(logdir)} if name == "wandb" else {}))
                self._writers.append((name, run if name == "wandb" else module))

    def log(self, metrics: dict[str, float], step: int) -> None:
        values = {k: float(v) for k, v in metrics.items() if v is not None}
        for name, writer in self._writers:
            if name == "tensorboard":
                for key, value in values.items():
                    writer.add_scalar(key, value, step)
            else:
                writer.log(values, step=step)

    def close(self) -> None:
        for name, writer in self._writers:
            if name == "tensorboard":
                writer.close()
            else:
                writer.finish()
        self._writers = []


def finish_library_trackers() -> None:
    """End the W&B / trackio run a TRL stage's ``report_to`` opened (transformers' callbacks leave it open until the
    process exits): its records are flushed now, and the next stage of the same process starts a run of its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()
    trackio = sys.modules.get("trackio")
    if trackio is not None:  # trackio exposes no current run: finishing none is its own no-op or error
        with contextlib.suppress(Exception):
            trackio.finish()


def check_log_folder(path: Path, overwrite: bool, beside: str) -> None:
    """Before anything is logged into ``path`` (the trackers' folder beside an output file): an existing one is used
    only with ``--overwrite`` and only when it holds what trackers write (TensorBoard event files, a W&B run), so a
    user's folder of that name is never written into."""
    from rlft.core.errors import OutputExistsError
    from rlft.core.manifest import EVENT_FILE_PREFIX

    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        return
    if not overwrite:
        raise OutputExistsError(f"{path} (the log folder beside {beside}) already exists",
                                hint="pass --overwrite to log into it again, or choose another --out")
    if path.is_symlink() or not path.is_dir():
        raise OutputExistsError(f"{path} (beside {beside}) is not a log folder rlft wrote",
                                hint="move it or choose another --out")
    foreign = sorted(str(f.relative_to(path)) for f in path.rglob("*") if not f.is_dir()
                     and not f.name.startswith(EVENT_FILE_PREFIX) and f.relative_to(path).parts[0] != "wandb")
    if foreign:
        raise OutputExistsError(f"{path} (the log folder beside {beside}) holds files no tracker wrote "
                                f"({', '.join(foreign[:5])}), so nothing is logged into it",
                                hint="move them or choose another --out")


def scratch_logdir(stage: str) -> Path:
    """A temporary folder for the trackers of a run whose own folder is written at its end (atomically)."""
    return Path(tempfile.mkdtemp(prefix=f"rlft-{stage}-logs-"))


def move_logs(logdir: Path, dest: Path) -> None:
    """What the trackers wrote into ``logdir`` goes to ``dest`` (RUN/logs of the run being written), when they
    wrote anything; the scratch folder is removed."""
    if any(logdir.iterdir()):
        shutil.copytree(logdir, dest)
    shutil.rmtree(logdir, ignore_errors=True)
