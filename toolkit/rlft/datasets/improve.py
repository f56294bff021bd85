"""Q-improved labels (``rlft data improve``): each recorded action replaced by a one-step policy improvement of it.

Why: an imitator trained on an expert's actions can at best play like that expert (issue #26: on HalfCheetah
medium the LLM, BC-MLP and the expert all sit at 39.5 normalized). The expert's own value says where it could do
better: for a recorded state ``s`` and label ``a``, candidates ``a + N(0, noise^2)`` (and ``a`` itself) are each
played from ``s`` (clipped to the action space, as the env would) in the real environment (state restored,
``rlft.envs.state``) and followed by the expert for ``horizon - 1`` steps, scoring ``Q_k(s, c) = sum_t gamma^t
r_t``: the expert's k-step Q. The new label is the best candidate (``best``) or their average weighted by
``softmax((Q - max Q) / std Q)`` (``soft``, the default: the random candidate set makes the best one a noisy
target, the weighted mean a smoother step in the improving direction), taken over the unclipped candidates and
clipped last (:func:`relabel`). All candidates of a state step in lockstep, one batched expert call per step.
``mirrored`` draws the perturbations in opposite pairs, so the soft label moves only by what the values say.

How much of a label's change an imitator can learn is measured, not assumed: the first ``consistency_rows`` rows
are relabelled a second time from an independent stream and the two changes compared
(:func:`label_consistency`, in the summary and the card).

Only the relabelled rows of the split are written (the first ``rows``); the other splits are copied unchanged, so
held-out action error still measures against the expert's own actions. Each written row keeps its old label in
``original_action``; ``rlft_info.json`` records the settings and the mean Q gain.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rlft.codecs.base import Codec
from rlft.core.console import progress
from rlft.core.errors import InvalidInputError
from rlft.core.io import atomic_output_dir, check_output_dir
from rlft.core.seeding import limit_threads
from rlft.datasets.dataset import RlftDataset
from rlft.datasets.improve_config import ImproveConfig
from rlft.datasets.layout import CARD_FILENAME, DATA_DIR, INFO_FILENAME, shard_path
from rlft.envs.registry import check_env_id
from rlft.envs.state import perturbation_values
from rlft.sources.experts import load_expert


def improved_action(values: np.ndarray, candidates: np.ndarray, weighting: str = "soft") -> np.ndarray:
    """The best candidate, or the candidates' mean weighted by ``softmax((Q - max Q) / std Q)`` (all equal: the
    plain mean)."""
    values = np.asarray(values, dtype=float)
    if weighting == "best":
        return candidates[int(np.argmax(values))]
    spread = values.std()
    weights = np.exp((values - values.max()) / spread) if spread > 0 else np.ones_like(values)
    return (weights[:, None] * candidates).sum(0) / weights.sum()


def relabel(values: np.ndarray, proposals: np.ndarray, low, high, weighting: str = "soft",
            step: float = 1.0) -> np.ndarray:
    """The new label from the unclipped proposals (the recorded action first) and the Q-values of their clipped,
    played versions: the recorded action moved ``step`` times the way to the improved action, clipped last.
    ``step`` > 1 extrapolates: an imitator learns only the part of a change that two draws share (a tenth of it
    on HalfCheetah, :func:`label_consistency`), so a longer step makes that part longer, its noise too.

    Averaging the clipped candidates instead pulled every saturated action inward (a label at the bound averages
    with perturbations that can only lie inside it): on HalfCheetah, where many expert actions sit at +-1, the
    relabelled LLM pushed at 0.973 of the data's magnitude and row 5f prices 0.98 at -0.35 points. The env plays a
    proposal past the bound as the bound, so ties beyond it average back to the bound."""
    target = improved_action(values, proposals, weighting)
    if step != 1.0:  # step 1 is the target itself, bit for bit (base + (target - base) can round differently)
        target = proposals[0] + step * (target - proposals[0])
    return np.clip(target, low, high)


def label_consistency(first: np.ndarray, second: np.ndarray) -> float | None:
    """Cosine between two independent draws of the same rows' label changes (all rows and dimensions as one
    vector): the share of a change's energy that is systematic in the state. On HalfCheetah medium with the
    defaults it is about 0.08: nine tenths of each label's change is noise an imitator must average away, which is
    why relabelled rows move a policy far less than test-time search (rows 5g, 5h). None without rows or change."""
    norms = float(np.sqrt((first * first).sum() * (second * second).sum()))
    return float((first * second).sum() / norms) if norms > 0 else None


def _check_horizon(env_id: str, horizon: int) -> None:
    """A candidate is scored over at most an episode of the env: its time limit ends every recorded episode."""
    import gymnasium

    limit = gymnasium.spec(check_env_id(env_id)).max_episode_steps
    if limit is not None and horizon > limit:
        raise InvalidInputError(f"--horizon {horizon:,} is longer than an episode of {env_id} ({limit:,} steps)",
                                hint=f"score candidates over at most {limit:,} steps (the default is 20)")


def _check_dataset(codec: Codec, expert_env: str | None) -> None:
    if codec.is_discrete_action:
        raise InvalidInputError("data improve relabels continuous (Box) actions; this dataset's actions are discrete",
                                hint="for discrete actions, Q-values label every action: rlft data export-q")
    if not codec.env_id:
        raise InvalidInputError("the dataset's codec records no env id: its states cannot be replayed")
    if expert_env and expert_env != codec.env_id:
        raise InvalidInputError(f"the expert was trained on {expert_env}, the dataset is {codec.env_id}")


def improve_dataset(config: ImproveConfig) -> dict[str, Any]:
    """Write ``config.out``: ``config.dataset`` with the first ``rows`` rows of ``split`` Q-improved (module doc).
    Returns the summary also written to the output's ``rlft_info.json`` under ``improved``."""
    config.check()
    source = Path(config.dataset)
    check_output_dir(config.out, config.overwrite, inputs=(("DATASET", source),))  # before the long part, not after it
    data = RlftDataset(source, str(config.dataset))  # a local folder, taken as it is (no Hub id here)
    codec = data.codec
    model, metadata = load_expert(config.expert)
    limit_threads()  # one batched expert call per step: torch threads fighting over 2 cores made it 30x slower
    _check_dataset(codec, metadata.get("env_id"))
    _check_horizon(codec.env_id, config.horizon)
    table = data.table(None, config.split)
    table = table.slice(0, min(config.rows, table.num_rows))
    for column in ("observation", "action", "completion"):
        if column not in table.column_names:
            raise InvalidInputError(f"{source}: the {config.split} split has no {column!r} column")
    _, space = codec.spaces()
    low, high = np.asarray(space.low, dtype=np.float32), np.asarray(space.high, dtype=np.float32)
    envs = [codec.make_env() for _ in range(config.candidates)]

    def act(batch):
        return model.predict(batch, deterministic=True)[0]

    def relabel_rows(observations, labels, rng, bar, task):
        new, gains = np.empty_like(labels), np.empty(len(labels))
        for i, (obs, label) in enumerate(zip(observations, labels, strict=True)):
            proposals, values = perturbation_values(envs, obs, label, rng, config.noise, low, high, act,
                                                    config.horizon, config.gamma, config.mirrored)
            new[i] = relabel(values, proposals, low, high, config.weighting, config.step)
            gains[i] = values.max() - values[0]
            bar.advance(task)
        return new, gains

    observations = table.column("observation").to_pylist()
    labels = np.asarray(table.column("action").to_pylist(), dtype=np.float32)
    checked = min(config.consistency_rows, len(labels))
    try:
        with progress() as bar:
            task = bar.add_task(f"improving {len(labels)} labels (+{checked} redrawn)", total=len(labels) + checked)
            new, gains = relabel_rows(observations, labels, np.random.default_rng(config.seed), bar, task)
            # the same rows drawn again from an independent stream: what two draws share is the state's own
            # improvement (learnable); the rest is the candidate set's luck, which an imitator can only average out
            again, _ = relabel_rows(observations[:checked], labels[:checked],
                                    np.random.default_rng([config.seed, 1]), bar, task)
    finally:
        for env in envs:
            env.close()
    summary = {**{k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items() if k != "overwrite"},
               "rows": len(labels), "mean_best_gain": float(gains.mean()),
               "mean_label_change": float(np.abs(new - labels).mean()),
               "consistency_rows": checked,
               "label_consistency": label_consistency(new[:checked] - labels[:checked], again - labels[:checked])}
    table = table.set_column(table.column_names.index("action"), "action", pa.array(list(new)))
    table = table.set_column(table.column_names.index("completion"), "completion",
                             pa.array([codec.build_completion(a) for a in new]))
    table = table.append_column("original_action", pa.array(list(labels)))
    _write(source, config, table, summary)
    return summary


def _write(source: Path, config: ImproveConfig, table: pa.Table, summary: dict[str, Any]) -> None:
    """The source folder copied, its ``split`` replaced by ``table``, the info and card told what changed."""
    import pyarrow.parquet as pq

    with atomic_output_dir(config.out, config.overwrite) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)
        for old in (tmp / DATA_DIR).glob(f"{config.split}-*.parquet"):
            old.unlink()
        pq.write_table(table, shard_path(tmp, config.split, 0, 1))
        info_path = tmp / INFO_FILENAME
        info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.is_file() else {}
        info["improved"] = summary
        info_path.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        card = tmp / CARD_FILENAME
        if card.is_file():
            card.write_text(card.read_text(encoding="utf-8") + IMPROVED_CARD.format(**{
                **summary, "label_consistency": "not measured" if summary["label_consistency"] is None
                else f"{summary['label_consistency']:.3f}"}), encoding="utf-8")


IMPROVED_CARD = """
## Q-improved labels

The first {rows} rows of the `{split}` split (and only those) carry improved actions (`rlft data improve`): each
recorded action and {candidates} - 1 perturbations of it (Gaussian, std {noise} of the half-range) were played from
the recorded state and followed by the expert for {horizon} steps in all (discount {gamma}); the label is the
`{weighting}` choice among them (moved {step} times the way to it; perturbations in opposite pairs: {mirrored}).
Mean gain of the best candidate over the recorded action: {mean_best_gain:.3f}; mean change of the label:
{mean_label_change:.4f}; label consistency (cosine between two independent draws of the first {consistency_rows}
rows' changes, the learnable share): {label_consistency}. The recorded action is in `original_action`.
"""
