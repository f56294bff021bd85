"""The answer grammar of every codec kind, and the token table built from it (once per codec+tokenizer)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlft.codecs import FrozenLakeGridCodec, make_codec
from rlft.envs.frozenlake import load_map
from rlft.policy.constrained import GrammarLogitsProcessor, build_token_table, token_texts
from rlft.policy.grammar import AnswerGrammar, Choice, Literal, Number, answer_grammar

RNG = np.random.default_rng(0)
OBS = RNG.uniform(-3, 3, (300, 3))
ACT = RNG.uniform(-2, 2, (300, 2))


def codecs():
    box_obs, box_act = gym.spaces.Box(-np.inf, np.inf, (3,)), gym.spaces.Box(-2, 2, (2,))
    return {
        "frozenlake": FrozenLakeGridCodec.for_map(load_map("4x4"), True),
        "discrete": make_codec("raw", box_obs, gym.spaces.Discrete(12, start=-2)),
        "raw": make_codec("raw", box_obs, box_act, precision=3),
        "raw-p0": make_codec("raw", box_obs, gym.spaces.Box(-150, 150, (1,)), precision=0),
        "discretized": make_codec("discretized", box_obs, box_act, observations=OBS, actions=ACT, bins=12),
        "tokenized": make_codec("tokenized", box_obs, box_act, observations=OBS, actions=ACT, tokens=100),
    }


@pytest.mark.parametrize("name", list(codecs()))
def test_grammar_accepts_every_encoded_action_and_rejects_bad_text(name):
    codec = codecs()[name]
    grammar = answer_grammar(codec)
    space = codec.spaces()[1]
    space.seed(0)
    for _ in range(50):
        text = codec.template.answer_text(codec.encode_action(space.sample()))
        assert grammar.matches(text), text
        codec.decode_action(text)  # and the codec parses it
    prefix, suffix = codec.template.answer_prefix, codec.template.answer_suffix
    for bad in ["", prefix + suffix, prefix + "x" + suffix, prefix + "1 2 3 4 5" + suffix, "LEFT", prefix + "  "]:
        assert not grammar.matches(bad), bad


def test_grammar_details():
    g = AnswerGrammar([Literal("<a>"), Number(2, 2), Literal(" "), Choice(["1", "10", "2"]), Literal("</a>")])
    assert g.matches("<a>-12.50 10</a>") and g.matches("<a>0.00 1</a>")
    assert not g.matches("<a>123.00 1</a>") and not g.matches("<a>1.5 1</a>") and not g.matches("<a>1.50 3</a>")
    assert g.max_chars() == 3 + 6 + 1 + 2 + 4
    raw = answer_grammar(codecs()["raw-p0"])
    assert raw.matches("<action>-150</action>") and not raw.matches("<action>1.0</action>")


def _word_tokenizer(pieces: list[str]):
    """A word-level tokenizer whose vocabulary is exactly ``pieces`` (greedy longest match)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<eos>", "<unk>"]
    vocab = {t: i for i, t in enumerate(special + pieces)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    alternation = "|".join(sorted((p.replace("\\", "\\\\").replace(".", r"\.").replace("-", r"\-")
                                   for p in pieces), key=len, reverse=True))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(alternation), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def _walk(table, rng, max_steps=200):
    """A random path through the table from the start to EOS: the concatenated token texts."""
    state, ids = 0, []
    for _ in range(max_steps):
        allowed = table.allowed[state]
        assert len(allowed), "dead end"
        tid = int(rng.choice(allowed))
        ids.append(tid)
        state = table.next_state(state, tid)
        if state < 0:
            return ids
    raise AssertionError("no EOS reached")


def test_token_table_multi_character_tokens():
    codec = codecs()["frozenlake"]
    pieces = ["<answer>", "</answer>", "</answer>\n", "LEFT", "LE", "FT", "DOWN", "RIGHT", "UP", "U", "P", "<", "a",
              "hello", " ", "L", "E", "F", "T", "<answer>LEFT"]
    tok = _word_tokenizer(pieces)
    table = build_token_table(codec, tok)
    texts = token_texts(tok)
    vocab = tok.get_vocab()
    start = {texts[t] for t in table.allowed[0]}
    assert start == {"<answer>", "<answer>LEFT"}  # "<" is a dead end here: no token writes "nswer" after "<a"
    assert "</answer>\n" not in {texts.get(int(t)) for s in table.allowed for t in s}  # overshoots the answer
    grammar = answer_grammar(codec)
    rng = np.random.default_rng(0)
    eos = tok.eos_token_id
    seen = set()
    for _ in range(200):
        ids = _walk(table, rng)
        assert ids[-1] == eos and eos not in ids[:-1]
        text = "".join(texts[i] for i in ids[:-1])
        assert grammar.matches(text), text
        seen.add(codec.decode_action(text))
    assert seen == {0, 1, 2, 3}
    # the logits processor applies the table to a batch, row by row
    import torch

    proc = GrammarLogitsProcessor(table, batch_size=2, prompt_len=3)
    scores = proc(torch.zeros((2, 3), dtype=torch.long), torch.zeros((2, len(tok))))
    assert torch.isfinite(scores[0]).sum() == len(table.allowed[0])
    step = torch.tensor([[0, 0, 0, vocab["<answer>"]], [0, 0, 0, vocab["<answer>LEFT"]]])
    scores = proc(step, torch.zeros((2, len(tok))))
    allowed1 = {texts[int(i)] for i in torch.nonzero(torch.isfinite(scores[1])).ravel()}
    assert allowed1 == {"</answer>"}  # only the closing tag may follow a complete action


def test_token_table_rejects_a_tokenizer_that_cannot_write_answers():
    from rlft.core.errors import InvalidInputError

    tok = _word_tokenizer(["<answer>", "</answer>", "hello"])
    with pytest.raises(InvalidInputError, match="cannot write any valid answer"):
        build_token_table(codecs()["frozenlake"], tok)


def test_byte_level_bpe_vocabulary_precomputes_fast(capsys):
    """A 4k-token byte-level BPE (GPT-2/SmolLM2 style, 'Ġ' spaces): every walk is a valid answer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    codec = make_codec("tokenized", gym.spaces.Box(-np.inf, np.inf, (3,)), gym.spaces.Box(-1, 1, (6,)),
                       observations=OBS, actions=RNG.uniform(-1, 1, (300, 6)), tokens=1000)
    rng = np.random.default_rng(1)
    corpus = [f"<observation>{' '.join(map(str, rng.integers(0, 1000, 3)))}</observation>\n"
              f"<action>{' '.join(map(str, rng.integers(0, 1000, 6)))}</action> the quick brown fox"
              for _ in range(3000)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=4000, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    table = build_token_table(codec, tok)
    with capsys.disabled():
        print(f"\n  constrained precompute: tokenized codec 6x1000 values, byte-level BPE {len(tok)} tokens: "
              f"{table.seconds * 1000:.0f} ms, {table.n_states} states, {table.candidate_tokens} candidate tokens")
    assert table.seconds < 20
    texts = token_texts(tok)
    assert any(t.startswith(" ") and len(t) > 1 for t in texts.values())  # 'Ġ' decoded to a space
    grammar = answer_grammar(codec)
    for _ in range(100):
        ids = _walk(table, rng)
        text = tok.decode(ids[:-1])
        assert grammar.matches(text), text
        assert codec.decode_action(text).shape == (6,)
