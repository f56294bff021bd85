"""One lifecycle for every training stage, as Stable-Baselines3's ``BaseAlgorithm`` gives every algorithm one: the
same steps in the same order, each stage filling them in.

1. :meth:`Stage.check`: settings, inputs and the output refused before anything is read at length or written;
2. :meth:`Stage.load_data`: the rows the stage learns from, read and checked;
3. :meth:`Stage.seed`: every generator seeded from ``config.seed``, in this one place, after the data and before
   the model, so initial weights and batch order follow the seed;
4. :meth:`Stage.build_model`: the model (and what trains it);
5. :meth:`Stage.learn`: train, save the run where ``--out`` says, return its record.

``rlft train sft|grpo`` are :class:`TRLStage` (a TRL trainer on an LLM: the model loaded with the dataset's checks,
TRL's arguments built before the run folder is written, the run marked failed or interrupted when training stops);
``rlft train bc|offline|online`` are :class:`Stage` with their own loops.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from rlft.core.seeding import limit_threads, seed_everything
from rlft.train.inputs import StageInputs, load_model_for_training
from rlft.train.stage import (
    checkpointing_field,
    criterion_first,
    finish_run,
    lora_config,
    model_defaults,
    run_outcome,
    start_run,
)


class Stage:
    """A training stage: ``Stage(config).run()`` runs the lifecycle above and returns the run's record."""

    name: ClassVar[str] = ""

    def __init__(self, config) -> None:
        self.config = _settled_out(config)
        self.rng = None

    def run(self) -> dict[str, Any]:
        limit_threads()
        self.check()
        self.load_data()
        self.seed()
        self.build_model()
        return self.learn()

    def check(self) -> None:
        """Refuse what cannot work before anything is written (nothing to check by default)."""

    def load_data(self) -> None:
        """Read and check the rows the stage learns from (an env-driven stage reads none)."""

    def seed(self) -> None:
        self.rng = seed_everything(self.config.seed)

    def build_model(self) -> None:
        raise NotImplementedError

    def learn(self) -> dict[str, Any]:
        raise NotImplementedError


def _settled_out(config):
    """``--out`` with a ``..`` in it named by its real parent: ``run/../run`` reached the old run through the run
    itself, so once the old run was set aside the new one could not be written, and the old one waited aside
    (hostile pass 12). Other paths are kept as given (they are recorded as given)."""
    out = getattr(config, "out", None)
    if out is None or ".." not in Path(out).parts or not Path(out).parent.is_dir():
        return config
    return dataclasses.replace(config, out=Path(out).parent.resolve() / Path(out).name)


class TRLStage(Stage):
    """A stage trained by a TRL trainer. Subclasses set :attr:`inputs` and :attr:`criterion` in
    :meth:`load_data` and say what differs: :meth:`training_args`, :meth:`trainer_class`, :meth:`trainer_inputs`,
    :meth:`callbacks_for`, :meth:`record` and :meth:`train`."""

    title: ClassVar[str] = ""
    learning_rates: ClassVar[tuple[float, float] | None] = None  # model_defaults' (from scratch, pretrained)

    def __init__(self, config, callbacks: list | None = None) -> None:
        super().__init__(config)
        self.extra_callbacks = callbacks  # e.g. to inspect weights during training
        self.inputs: StageInputs | None = None
        self.criterion = None

    def build_model(self) -> None:
        self.model, self.tokenizer = load_model_for_training(self.inputs, self.config.allow_tokenizer_mismatch)
        self.config = model_defaults(self.config, self.model, self.learning_rates)
        self.prepare()
        # built before start_run (the run folder is --out): TRL refuses bad settings before anything is written
        self.args, self.trl_args = self.training_args(Path(self.config.out))

    def prepare(self) -> None:
        """What the stage builds around the loaded model before TRL's arguments (GRPO: its rollout)."""

    def learn(self) -> dict[str, Any]:
        run_dir, checkpoint, info = start_run(self.config, self.name, self.inputs, self.record())
        with run_outcome(run_dir, info):
            if self.args[checkpointing_field()] and self.config.lora:
                self.model.enable_input_require_grads()  # LoRA + checkpointing: else adapters never learn
            trainer = self.trainer_class()(
                model=self.model,
                args=self.trl_args,
                processing_class=self.tokenizer,
                peft_config=lora_config(self.config) if self.config.lora else None,
                callbacks=self.callbacks_for(run_dir),
                **self.trainer_inputs(),
            )
            criterion_first(trainer, self.criterion)
            metrics = self.train(trainer, run_dir, checkpoint)
            return finish_run(trainer, run_dir, info, metrics, f"{self.title} run -> {run_dir}", self.criterion)

    def training_args(self, run_dir: Path):
        """(the shared TrainingArguments fields, TRL's config object)."""
        raise NotImplementedError

    def trainer_class(self):
        raise NotImplementedError

    def trainer_inputs(self) -> dict[str, Any]:
        """The trainer's data arguments (datasets, rewards, rollout)."""
        raise NotImplementedError

    def callbacks_for(self, run_dir: Path) -> list:
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """What ``rlft_run.json`` records of the stage's own setup, beside the shared fields."""
        return {}

    def train(self, trainer, run_dir: Path, checkpoint) -> dict[str, Any]:
        """Run ``trainer`` (from ``checkpoint`` when resuming) and return the run's metrics."""
        raise NotImplementedError
