"""Models that need no Hub: tiny from-scratch causal LMs with a tokenizer trained on the dataset's own text,
and resolution/loading of any local model folder or Hub id (Hub ids fail fast and clearly when offline;
datasets are resolved the same way by :mod:`rlft.hub.datasets`).

The tiny tokenizer is word level (``tokenizers`` WordLevel): the text is cut by one regular expression into
answer tags (``<answer>``), letter runs, numbers, single whitespace characters and single punctuation
characters; every piece seen in the data becomes a token, and tokens concatenate back to the exact text.
Numbers are single digits, except for ``tokenized`` codecs, where each value 0..N-1 is one token. Special
tokens: ``<|pad|>``, ``<|bos|>`` (prepended to plain text and by the chat template), ``<|im_start|>`` and
``<|im_end|>`` (= EOS, the end-of-turn token), ``<|unk|>``. The chat template is ChatML, so chat-style
datasets work with TRL as they do with SmolLM2.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlft.codecs.base import Codec, load_codec
from rlft.core.console import console, kv_table
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_output_dir
from rlft.hub.datasets import hub_snapshot, load_dataset_dict, looks_like_hub_id, resolve_dataset

PAD, BOS, UNK = "<|pad|>", "<|bos|>", "<|unk|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, BOS, UNK, IM_START, IM_END]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MODEL_INFO_FILENAME = "rlft_model.json"
_TAG = r"</?[A-Za-z_]+>"


def split_pattern(digits_per_token: int) -> str:
    """The pre-tokenizer regex: tags, letter runs, numbers (``digits_per_token`` digits at most), one space
    or punctuation character."""
    number = r"\d" if digits_per_token <= 1 else rf"\d{{1,{digits_per_token}}}"
    return rf"{_TAG}|[A-Za-z]+|{number}|\s|[^\sA-Za-z\d]"


@dataclass
class ModelInitConfig:
    """``rlft model init``: a from-scratch Llama-architecture model sized for CPU tests and demos."""

    dataset: str
    out: Path
    layers: int = 2
    hidden: int = 64
    heads: int = 4
    kv_heads: int | None = None
    intermediate: int | None = None  # default 4 * hidden
    max_positions: int | None = None  # default: fitted to the longest example (x2, at least 256)
    init_std: float | None = None  # default hidden ** -0.5 (see build_tiny_model)
    max_rows: int = 20_000  # rows read to train the tokenizer
    seed: int = 0
    overwrite: bool = False


# --------------------------------------------------------------------------------------------------------
# dataset text
# --------------------------------------------------------------------------------------------------------
def _as_text(value) -> str:
    """A prompt/completion cell (string or chat messages) as one string."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(f"{m.get('role', '')}\n{m.get('content', '')}" for m in value if isinstance(m, dict))
    return "" if value is None else str(value)


def dataset_texts(dataset_dict, max_rows: int) -> Iterator[str]:
    """Up to ``max_rows`` prompt + completion texts, train split first."""
    left = max_rows
    names = sorted(dataset_dict, key=lambda s: (s != "train", s))
    for split in names:
        ds = dataset_dict[split]
        cols = [c for c in ("prompt", "completion") if c in ds.column_names]
        if not cols or left <= 0:
            continue
        for batch in ds.select_columns(cols).iter(batch_size=1000):
            n = min(left, len(batch[cols[0]]))
            for i in range(n):
                yield "\n".join(_as_text(batch[c][i]) for c in cols)
            left -= n
            if left <= 0:
                break


def _digits_per_token(codec: Codec | None) -> int:
    if codec is not None and codec.kind == "tokenized":
        return len(str(codec.tokens - 1))
    return 1


def _coverage_text(codec: Codec | None) -> list[str]:
    """Pieces every tiny tokenizer knows: printable ASCII, special-free; every token value of a tokenized codec."""
    pieces = [c for c in string.printable if c not in "\x0b\x0c"]
    if codec is not None and codec.kind == "tokenized":
        pieces += [str(i) for i in range(codec.tokens)]
    return [" ".join(pieces)]


def train_tokenizer(texts, codec: Codec | None = None, vocab_size: int = 32_000):
    """A word-level ``PreTrainedTokenizerFast`` fitted on ``texts`` (see the module docstring)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    pattern = split_pattern(_digits_per_token(codec))
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=SPECIAL_TOKENS)

    def corpus():
        yield from _coverage_text(codec)
        yield from texts

    tok.train_from_iterator(corpus(), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _longest(tokenizer, texts: list[str]) -> int:
    if not texts:
        return 0
    return max(len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"])


def default_init_std(hidden: int) -> float:
    """``hidden ** -0.5``: attention logits and the tied output logits start with unit variance.

    transformers' default (``initializer_range`` 0.02) is sized for models hundreds of units wide. At hidden 64
    it gives attention logits with a standard deviation of about 0.03: attention is uniform over the prompt, the
    gradients of the query and key weights are each proportional to the other (a saddle at zero), and a tiny
    model sits at the marginal action distribution until noise pushes it off. Measured on the FrozenLake demo
    (steps until every state is optimal, seeds 0-4): 230-450 with 0.02, 50-70 with 0.125.
    """
    return float(hidden) ** -0.5


def build_tiny_model(tokenizer, layers: int, hidden: int, heads: int, kv_heads: int | None = None,
                     intermediate: int | None = None, max_positions: int = 512, seed: int = 0,
                     init_std: float | None = None):
    """A randomly initialised ``LlamaForCausalLM`` for ``tokenizer`` (tied embeddings, seeded, weights drawn
    with standard deviation ``init_std``, default :func:`default_init_std`)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    if layers < 1 or hidden < 1 or heads < 1:
        raise InvalidInputError(f"layers, hidden and heads must be positive, got {layers}, {hidden}, {heads}")
    if hidden % heads:
        raise InvalidInputError(f"--hidden {hidden} must be a multiple of --heads {heads}")
    kv_heads = kv_heads or heads
    if heads % kv_heads:
        raise InvalidInputError(f"--heads {heads} must be a multiple of kv heads {kv_heads}")
    if (hidden // heads) % 2:
        raise InvalidInputError(f"head size hidden/heads = {hidden // heads} must be even (rotary embeddings)")
    init_std = default_init_std(hidden) if init_std is None else float(init_std)
    if not 0.0 < init_std < 10.0:
        raise InvalidInputError(f"--init-std must be positive (and below 10), got {init_std}")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        initializer_range=init_std,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def init_model(config: ModelInitConfig) -> dict[str, Any]:
    """Train the tokenizer on the dataset's text, build the tiny model, save both at ``config.out``."""
    from rlft.core.io import check_output_dir

    check_output_dir(config.out, config.overwrite)
    if config.max_rows < 1:
        raise InvalidInputError(f"--max-rows must be at least 1, got {config.max_rows}")
    local = resolve_dataset(config.dataset)
    codec = load_codec(local)
    data = load_dataset_dict(local)
    texts = list(dataset_texts(data, config.max_rows))
    if not texts:
        raise InvalidInputError(f"dataset {config.dataset} has no prompt/completion text to train a tokenizer on")
    tokenizer = train_tokenizer(texts, codec)
    longest = _longest(tokenizer, texts[:2000]) + 8  # chat markers and EOS
    max_positions = config.max_positions or max(256, 1 << (2 * longest - 1).bit_length())
    model = build_tiny_model(tokenizer, config.layers, config.hidden, config.heads, config.kv_heads,
                             config.intermediate, max_positions, config.seed, config.init_std)
    tokenizer.model_max_length = max_positions
    unk_rate = _unk_rate(tokenizer, texts[:2000])
    info = {
        "kind": "tiny",
        "dataset": str(config.dataset),
        "codec_kind": codec.kind,
        "vocab_size": len(tokenizer),
        "parameters": sum(p.numel() for p in model.parameters()),
        "max_positions": max_positions,
        "init_std": model.config.initializer_range,
        "longest_example_tokens": longest - 8,
        "unknown_token_rate": unk_rate,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
    }
    with atomic_output_dir(config.out, config.overwrite) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MODEL_INFO_FILENAME).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    console.print(kv_table(f"tiny model -> {config.out}", {k: v for k, v in info.items() if k != "config"}))
    return info


def _unk_rate(tokenizer, texts: list[str]) -> float:
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    total = sum(len(x) for x in ids)
    return sum(x.count(tokenizer.unk_token_id) for x in ids) / total if total else 0.0


# --------------------------------------------------------------------------------------------------------
# resolving and loading models: local folders first, then the Hub (rlft.hub.datasets.hub_snapshot)
# --------------------------------------------------------------------------------------------------------
def resolve_model(name: str | os.PathLike) -> str:
    """A local folder holding a model (config.json) or a LoRA adapter for ``name`` (local path or Hub id)."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not ((path / "config.json").is_file() or (path / "adapter_config.json").is_file()):
            raise InvalidInputError(
                f"{path} holds no model (no config.json or adapter_config.json)",
                hint="make one with rlft model init / rlft model fetch, or pass a training RUN folder",
            )
        return str(path)
    text = str(name)
    if path.exists() or not looks_like_hub_id(text):
        raise InvalidInputError(f"model {text!r} does not exist", hint="pass a model folder or a Hub id")
    return hub_snapshot(text, "model")


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # noqa: BLE001 - a damaged or missing tokenizer file: say which folder
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInputError(f"cannot load the tokenizer of {path}: {first}",
                                hint="the model folder is damaged: make or fetch it again") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(path: str, dtype=None):
    """``AutoModelForCausalLM.from_pretrained`` of a resolved local folder, with a clear error."""
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - report which folder failed
        raise InvalidInputError(f"cannot load a causal LM from {path}: {exc}") from exc


def count_parameters(model) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    def numel(p) -> int:
        return int(getattr(p, "ds_numel", 0) or p.numel())  # DeepSpeed ZeRO-3 partitions parameters

    total = sum(numel(p) for p in model.parameters())
    trainable = sum(numel(p) for p in model.parameters() if p.requires_grad)
    return trainable, total
