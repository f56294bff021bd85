"""What a training stage reads, checked before anything is written: the dataset (its codec, training split and
columns), the model and whether its tokenizer reads the dataset's text, and the prompt text as the model sees it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlft.codecs.base import Codec
from rlft.core.errors import InvalidInputError, OutputExistsError
from rlft.core.io import refuse_overlap
from rlft.core.output_names import check_output_parent
from rlft.datasets.dataset import RlftDataset, recorded_name
from rlft.datasets.loading import column_array
from rlft.datasets.row_checks import check_finite_rows
from rlft.models.resolve import resolve_model
from rlft.models.run import load_policy_model, model_lineage
from rlft.train.configs import StageConfig


@dataclass
class StageInputs:
    data: RlftDataset  # opened once: its folder, codec and splits
    train: Any  # datasets.Dataset
    model_path: str  # resolved local folder
    base_model: str  # recorded: absolute folder, or the Hub id
    conversational: bool

    @property
    def dataset(self) -> str:
        """The dataset as the run records it: absolute folder, or the Hub id."""
        return self.data.recorded

    @property
    def codec(self) -> Codec:
        return self.data.codec


def load_inputs(config: StageConfig, stage: str, needed_columns: tuple[str, ...]) -> StageInputs:
    """Resolve and check the dataset, its codec and splits, and the model, before anything is written."""
    config.require("dataset", "model", "out")
    refuse_overlap(config.out, [("--dataset", config.dataset), *model_lineage("--model", config.model),
                                ("--config", getattr(config, "config_file", None))])
    _check_out_folder(Path(config.out))
    _check_training_numbers(config)
    data = RlftDataset.open(config.dataset)
    _ = data.codec  # a missing or damaged codec is refused before the splits are read
    train = _train_split(config, data.splits(), stage, needed_columns)
    model_path = resolve_model(config.model)
    conversational = isinstance(train[0]["prompt"], list)
    return StageInputs(
        data=data,
        train=train,
        model_path=model_path,
        base_model=recorded_name(config.model),
        conversational=conversational,
    )



def _check_out_folder(out: Path) -> None:
    """Refuse an ``--out`` that is a file, or whose parent cannot hold a folder."""
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"--out {out} exists and is not a folder", hint="give a RUN folder path")
    check_output_parent(out)  # a parent that is a file, or no permission: refused before any model is loaded



def _check_training_numbers(config: StageConfig) -> None:
    """Refuse sizes, step counts and a learning rate TRL would take but cannot train with."""
    for name in ("lora_r", "lora_alpha", "per_device_train_batch_size", "gradient_accumulation_steps",
                 "logging_steps", "save_steps"):
        if getattr(config, name) < 1:
            raise InvalidInputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(config, name)}")
    if config.max_steps == 0 or config.max_steps < -1:
        raise InvalidInputError(f"--max-steps must be positive (or -1 for epochs), got {config.max_steps}")
    if config.learning_rate is not None and not 0 < config.learning_rate < float("inf"):
        raise InvalidInputError(f"--learning-rate must be positive, got {config.learning_rate}")



def _train_split(config: StageConfig, data, stage: str, needed_columns: tuple[str, ...]):
    """The training split of ``data``, checked for the columns ``stage`` needs and cut to ``max_train_samples``."""
    if config.train_split not in data:
        raise InvalidInputError(f"dataset {config.dataset} has no split {config.train_split!r}",
                                hint=f"its splits: {', '.join(data)}")
    train = data[config.train_split]
    missing = [c for c in needed_columns if c not in train.column_names]
    if missing:
        raise InvalidInputError(
            f"dataset {config.dataset} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"needed by {stage}",
            hint=f"its columns: {', '.join(train.column_names)}",
        )
    if len(train) == 0:
        raise InvalidInputError(f"split {config.train_split!r} of {config.dataset} is empty")
    for name in needed_columns:  # text, or chat messages: a number there is no prompt a tokenizer can read
        feature = train.features[name]
        kind = getattr(feature, "dtype", None) if not isinstance(feature, list) else "list"
        if kind not in ("string", "large_string", "list", None):
            raise InvalidInputError(f"column {name!r} of {config.dataset} holds {kind} values, not text or chat "
                                    "messages", hint="serialize the data with rlft data serialize, which writes text")
    if config.max_train_samples is not None:
        if config.max_train_samples < 1:
            raise InvalidInputError("--max-train-samples must be at least 1")
        train = train.select(range(min(config.max_train_samples, len(train))))
    # the numbers behind the text: a non-finite one means the rows were not written by rlft's serializer (which
    # refuses them) and the text no longer says what the env saw; refused as train bc refuses them
    table = data[config.train_split].data.table
    check_finite_rows(config.dataset, config.train_split,
                      [(c, values) for c in ("observation", "action") if (values := _numbers(table, c)) is not None])
    return train


def _numbers(table, name: str):
    """The column as numbers, or None when it is absent or not a fixed-width number column (text, a structured
    observation, maps of several sizes): nothing there can be non-finite."""
    if name not in table.column_names:
        return None
    try:
        return column_array(table, name)
    except (TypeError, ValueError):
        return None



def pick_eval_split(data_splits: dict, train, eval_split: str, val_fraction: float, seed: int,
                    max_eval: int | None):
    """(train, eval dataset or None, eval name) following ``eval_split`` (see SFTStageConfig.eval_split)."""
    if not 0.0 <= val_fraction < 1.0:
        raise InvalidInputError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    name = eval_split
    if eval_split == "none":
        return train, None, None
    if eval_split == "auto":
        name = next((s for s in ("validation", "test") if s in data_splits and len(data_splits[s])), None)
        if name is None:
            if val_fraction <= 0 or len(train) < 2:
                return train, None, None
            parts = train.train_test_split(test_size=val_fraction, seed=seed)
            train, evaluation, name = parts["train"], parts["test"], f"{int(val_fraction * 100)}% of train"
            return train, _cap(evaluation, max_eval), name
    elif eval_split not in data_splits:
        raise InvalidInputError(f"--eval-split {eval_split!r} is not a split of the dataset",
                                hint=f"its splits: {', '.join(data_splits)}; or auto / none")
    return train, _cap(data_splits[name], max_eval), name



def _cap(ds, n: int | None):
    return ds.select(range(min(n, len(ds)))) if n is not None and n > 0 else ds



def load_model_for_training(inputs: StageInputs, allow_tokenizer_mismatch: bool = False):
    """(model, tokenizer) from ``inputs.model_path`` (a RUN folder is merged first), with checks: chat template,
    EOS, and that the tokenizer reads the dataset's text and the model holds it (:func:`check_tokenizer_fits`)."""
    model, tokenizer, _ = load_policy_model(inputs.model_path, merge=True)
    model.train()
    model.requires_grad_(True)  # a merged LoRA run comes back frozen; LoRA, when on, freezes the base itself
    if inputs.conversational and not tokenizer.chat_template:
        raise InvalidInputError(
            f"the dataset's prompts are chat messages but model {inputs.base_model} has no chat template",
            hint="use a chat model (rlft model init makes one), or a dataset made with --prompt-style plain",
        )
    if tokenizer.eos_token is None:
        raise InvalidInputError(f"the tokenizer of {inputs.base_model} has no EOS token")
    if not allow_tokenizer_mismatch:
        check_tokenizer_fits(inputs, tokenizer, model)
    return model, tokenizer



UNKNOWN_TOKEN_LIMIT = 0.01  # share of <unk> tokens in the dataset's text above which a model cannot read it



CHECKED_ROWS = 256



def check_tokenizer_fits(inputs: StageInputs, tokenizer, model) -> None:
    """Refuse, before training, a model that cannot read the dataset: a tokenizer that maps more than 1% of the
    text of a sample of rows to its unknown token (a tiny tokenizer made for another dataset), or rows longer
    than the model's positions (RoPE models only warn, then train on positions they never saw)."""
    rows = inputs.train.select(range(min(CHECKED_ROWS, len(inputs.train))))
    texts = [_row_text(r, tokenizer, inputs.conversational) for r in rows]
    ids = tokenizer(texts, add_special_tokens=not inputs.conversational)["input_ids"]
    hint = "use the model made for this dataset (rlft model init --dataset DIR), or --allow-tokenizer-mismatch"
    unk = tokenizer.unk_token_id
    if unk is not None:
        total = sum(len(i) for i in ids)
        share = sum(i.count(unk) for i in ids) / max(1, total)
        if share > UNKNOWN_TOKEN_LIMIT:
            raise InvalidInputError(f"the tokenizer of {inputs.base_model} maps {share:.0%} of the dataset's tokens "
                                    f"to {tokenizer.unk_token!r}: the model cannot read this codec's text", hint=hint)
    limit = getattr(model.config, "max_position_embeddings", None)
    longest = max((len(i) for i in ids), default=0)
    if limit and longest > limit:
        raise InvalidInputError(f"rows of {inputs.dataset} are up to {longest} tokens (prompt and completion) but "
                                f"{inputs.base_model} has {limit} positions",
                                hint="make the model with rlft model init --max-positions N, use a shorter prompt "
                                     "style, or --allow-tokenizer-mismatch")



def prompt_text(prompt, tokenizer, conversational: bool) -> str:
    """A prompt as the model sees it: chat messages through the chat template (generation prompt added)."""
    if conversational:
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    return str(prompt)



def _row_text(row: dict, tokenizer, conversational: bool) -> str:
    """A row's prompt as the model sees it and its completion, as one text."""
    completion = row.get("completion")
    if isinstance(completion, list):
        completion = "".join(m.get("content", "") for m in completion)
    return prompt_text(row["prompt"], tokenizer, conversational) + str(completion or "")



def prompt_token_metrics(train, tokenizer, conversational: bool, max_rows: int = 1000) -> dict[str, float]:
    """Prompt length in the model's own tokens (chat template included), mean and max over up to ``max_rows``
    training rows: what a step and an evaluation call cost, and the figure codecs and wordings are compared by."""
    rows = train.select(range(min(max_rows, len(train))))["prompt"]
    texts = [prompt_text(p, tokenizer, conversational) for p in rows]
    # the chat template writes its own special tokens; a plain prompt gets the tokenizer's
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=not conversational)["input_ids"]]
    return {"prompt_tokens_mean": float(sum(lengths) / len(lengths)), "prompt_tokens_max": int(max(lengths))}
