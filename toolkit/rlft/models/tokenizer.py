"""The tiny models' tokenizer, trained on the dataset's own text (``rlft model init``).

It is word level (``tokenizers`` WordLevel): the text is cut by one regular expression into answer tags
(``<answer>``), letter runs, numbers, single whitespace characters and single punctuation characters; every piece
seen in the data becomes a token, and tokens concatenate back to the exact text. Numbers are single digits, except
for ``tokenized`` codecs, where each value 0..N-1 is one token, and ``binned`` codecs, where each bin index with the
separator before it (``" 15"``) is one token. Special tokens: ``<|pad|>``, ``<|bos|>`` (prepended
to plain text and by the chat template), ``<|im_start|>`` and ``<|im_end|>`` (= EOS, the end-of-turn token),
``<|unk|>``. The chat template is ChatML, so chat-style datasets work with TRL as they do with SmolLM2.
"""

from __future__ import annotations

import string
from collections.abc import Iterator

from rlft.codecs.base import Codec

PAD, BOS, UNK = "<|pad|>", "<|bos|>", "<|unk|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, BOS, UNK, IM_START, IM_END]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_TAG = r"</?[A-Za-z_]+>"



def split_pattern(digits_per_token: int, separated: bool = False) -> str:
    """The pre-tokenizer regex: tags, letter runs, numbers (``digits_per_token`` digits at most; with
    ``separated``, a number takes the space or comma before it), one space or punctuation character."""
    number = r"\d" if digits_per_token <= 1 else rf"\d{{1,{digits_per_token}}}"
    if separated:
        number = rf"[ ,]?{number}"
    return rf"{_TAG}|[A-Za-z]+|{number}|\s|[^\sA-Za-z\d]"



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


# What a binned codec writes before a bin index (nothing for the first value): each "<sep><k>" is one token.
BIN_SEPARATORS = ("", " ", ",")


def value_token_count(codec: Codec | None) -> int:
    """How many integer values the codec writes as one token each (0 when numbers are written digit by digit):
    a tokenized codec's tokens, a binned codec's largest bin count."""
    if codec is not None and codec.kind == "tokenized":
        return codec.tokens
    if codec is not None and codec.kind == "binned":
        counts = [len(e) - 1 for role in ("observation", "action") for e in (codec.edges[role] or [])]
        return max(counts, default=codec.bins)
    return 0


def _digits_per_token(codec: Codec | None) -> int:
    return len(str(value_token_count(codec) - 1)) if value_token_count(codec) else 1


def _coverage_text(codec: Codec | None) -> list[str]:
    """Pieces every tiny tokenizer knows: printable ASCII, special-free; every value of a tokenized codec; every bin
    index of a binned codec, alone and after each separator (one token per written value)."""
    pieces = [c for c in string.printable if c not in "\x0b\x0c"]
    if codec is not None and codec.kind == "binned":
        # one piece per line: a space between pieces would be taken into the next number
        return ["\n".join(pieces + [f"{sep}{i}" for i in range(value_token_count(codec)) for sep in BIN_SEPARATORS])]
    pieces += [str(i) for i in range(value_token_count(codec))]
    return [" ".join(pieces)]


def train_tokenizer(texts, codec: Codec | None = None, vocab_size: int = 32_000):
    """A word-level ``PreTrainedTokenizerFast`` fitted on ``texts`` (see the module docstring)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    pattern = split_pattern(_digits_per_token(codec), separated=codec is not None and codec.kind == "binned")
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


def longest_tokens(tokenizer, texts: list[str]) -> int:
    """Tokens of the longest of ``texts`` (special tokens included)."""
    if not texts:
        return 0
    return max(len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"])
