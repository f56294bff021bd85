"""``rlft data combine``: local Minari datasets of one env and the same spaces as one (D4RL's medium-expert is
medium and expert together), written staged like every Minari dataset rlft writes."""

from __future__ import annotations

from pathlib import Path

from rlft.core.errors import InvalidInputError
from rlft.sources.minari_source import (
    check_dataset_id,
    data_folder,
    datasets_root,
    load_minari,
    space_line,
    staged_dataset,
)


def _source_folder(source: str) -> Path:
    """Where a dataset given as a folder, its ``data/`` folder or a local id keeps its data (resolved, to tell two
    spellings of one apart: hostile pass 14, B12, ``ns/x-v0`` and ``.../ns/x-v0/data`` are one dataset)."""
    path = Path(source).expanduser()
    folder = path if path.is_dir() else datasets_root() / source
    data = data_folder(folder)
    return (data if data is not None else folder / "data").resolve()


def _check_sources(sources: list[str], dataset_id: str) -> None:
    """At least two datasets, none twice (its episodes would be in the combination twice), none the target."""
    if len(sources) < 2:
        raise InvalidInputError("rlft data combine needs at least two datasets")
    places = [_source_folder(s) for s in sources]
    twice = sorted({s for s, p in zip(sources, places, strict=True) if places.count(p) > 1})
    if twice:
        raise InvalidInputError(f"rlft data combine: {', '.join(twice)} given more than once")
    if _source_folder(dataset_id) in places:
        raise InvalidInputError(f"--dataset-id {dataset_id} is one of the datasets combined: a combination cannot "
                                "replace its own source", hint="give the combination a new id (or version -vN)")


def combine(sources: list[str], dataset_id: str, overwrite: bool = False) -> Path:
    """Minari's ``combine_datasets`` over local datasets of one env and the same spaces (D4RL's medium-expert is
    medium and expert together), written staged; the sources' reference scores and their ids are kept. Datasets of
    different envs or spaces are refused by name before anything is written."""
    import warnings

    import minari

    check_dataset_id(dataset_id)
    _check_sources(sources, dataset_id)
    if (datasets_root() / dataset_id).exists() and not overwrite:
        raise InvalidInputError(f"Minari dataset {dataset_id} already exists in {datasets_root()}",
                                hint="pass --overwrite to replace it, or bump the version (-vN)")
    opened = [load_minari(s) for s in sources]
    first = opened[0]
    for source, ds in zip(sources[1:], opened[1:], strict=True):
        env_a = first.spec.env_spec.id if first.spec.env_spec else None
        env_b = ds.spec.env_spec.id if ds.spec.env_spec else None
        if env_a != env_b:
            raise InvalidInputError(f"cannot combine {sources[0]} ({env_a}) with {source} ({env_b}): the datasets "
                                    "of a combination share one env")
        for what in ("observation_space", "action_space"):
            if getattr(first, what) != getattr(ds, what):
                raise InvalidInputError(f"cannot combine {sources[0]} with {source}: their {what.replace('_', ' ')}s "
                                        f"differ ({space_line(getattr(first, what))} vs "
                                        f"{space_line(getattr(ds, what))})")
    refs = {(d.storage.metadata.get("ref_min_score"), d.storage.metadata.get("ref_max_score")) for d in opened}
    with staged_dataset(dataset_id, overwrite) as final, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        (datasets_root() / dataset_id).parent.mkdir(parents=True, exist_ok=True)  # Minari makes only the last part
        try:
            combined = minari.combine_datasets(opened, dataset_id)
        except ValueError as exc:  # Minari's own env-spec check
            raise InvalidInputError(f"Minari cannot combine {', '.join(sources)}: {exc}") from exc
        meta = {"combined_from": list(sources)}
        if len(refs) == 1:  # the sources agree: the combination is scored on the same scale
            low, high = next(iter(refs))
            if low is not None and high is not None:
                meta.update(ref_min_score=low, ref_max_score=high)
        combined.storage.update_metadata(meta)
    return final
