"""Tiny random models that real third-party servers load from a local folder, built offline in seconds.

    <env python> tests/thirdparty/models.py OUT_DIR {llama,whisper,bert} [...]   each into OUT_DIR/<name>/

Run by tests/thirdparty/conftest.py with the interpreter of the server that will load the model
(.thirdparty/transformers for llama and whisper, in one process, .thirdparty/infinity for bert:
transformers 5 and 4 write their tokenizer files differently, so each model is saved by the version that
reads it). Nothing
comes from a hub: configs are written here, weights are random (seeded), tokenizers are built with the
`tokenizers` library from the small corpus below.

What makes the replies predictable, so that tests can state exact protocol facts:
- the LLM tokenizer is a WordLevel one (whitespace-split words, decoded joined by spaces): every generated
  token decodes to non-empty text, so a server that streams one event per token shows exactly one content
  chunk per token;
- in the LLM and in Whisper, the output rows of the special tokens (and of Whisper's non-ASCII byte tokens)
  are zero: their logit is always 0 while the other few hundred are random with a positive maximum, so
  greedy decoding never picks them. The LLM thus never ends by itself (every reply runs to max_tokens,
  finish_reason "length") unless the request biases EOS (`logit_bias`); Whisper's transcript is plain ASCII,
  and it is cut at WHISPER_MAX_NEW_TOKENS.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SEED = 0
CORPUS = """
the quick brown fox jumps over the lazy dog while a small model answers every question it is asked
a server streams tokens one at a time and the client measures the time to the first token and between tokens
speech is turned into text by an encoder and a decoder and the reply is a short transcript of what was said
embeddings map each sentence to a vector so that similar sentences are close to each other
load tests send many requests at a fixed rate and record how long each one takes to complete
sharing one device between several models may save money or may make every model slower
hello world this is a test of the benchmark plugin with tiny random models on a small machine
please write a short story about a robot who learns to sing in the rain under a bright sky
one two three four five six seven eight nine ten eleven twelve
"""
LLM_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} {{ eos_token }} "
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
WHISPER_SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|translate|>",
                    "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
WHISPER_MAX_NEW_TOKENS = 8
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _words() -> list[str]:
    return sorted(set(CORPUS.split()))


def _never_generated(weight, token_ids) -> None:  # type: ignore[no-untyped-def]
    """Zero the output rows of ``token_ids``: a logit of 0 against a few hundred random ones is never the argmax."""
    import torch

    with torch.no_grad():
        weight[list(token_ids)] = 0.0


def build_llama(out: Path) -> None:
    """A 2-layer Llama (hidden 64) with a WordLevel tokenizer, a chat template, BOS/EOS/PAD, greedy by default."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*LLM_SPECIALS, *_words()])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces, as WordLevel wants
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
        additional_special_tokens=LLM_SPECIALS[4:], model_max_length=512, chat_template=CHAT_TEMPLATE,
    )
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"],
        pad_token_id=vocab["<pad>"], tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    _never_generated(model.lm_head.weight, [vocab[t] for t in LLM_SPECIALS])
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
        do_sample=False,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _byte_level_bpe(specials: list[str]):  # type: ignore[no-untyped-def]
    """A byte-level BPE (Whisper's kind) trained on CORPUS: its vocab and merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(CORPUS.split("\n"), trainer)
    state = json.loads(backend.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    return state["vocab"], merges


def build_whisper(out: Path) -> None:
    """A 1+1-layer Whisper (d_model 64, 80 mel bins) with a WhisperProcessor, English-only, no timestamps."""
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizerFast,
    )

    vocab, merges = _byte_level_bpe(WHISPER_SPECIALS)
    tokenizer = WhisperTokenizerFast(vocab=vocab, merges=merges, unk_token="<|endoftext|>",
                                     bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                     pad_token="<|endoftext|>", additional_special_tokens=WHISPER_SPECIALS[1:])
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in WHISPER_SPECIALS}
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer)
    torch.manual_seed(SEED)
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        vocab_size=len(tokenizer), num_mel_bins=80, d_model=64, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
        max_source_positions=1500, max_target_positions=64, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
        decoder_start_token_id=sot, tie_word_embeddings=False, suppress_tokens=[], begin_suppress_tokens=[],
    )
    model = WhisperForConditionalGeneration(config).eval()
    non_ascii = [i for token, i in vocab.items() if any(ord(c) > 126 or ord(c) < 33 for c in token) and token != "Ġ"]
    _never_generated(model.proj_out.weight, [*ids.values(), *non_ascii])
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
        no_timestamps_token_id=ids["<|notimestamps|>"], is_multilingual=False, forced_decoder_ids=None,
        suppress_tokens=[], begin_suppress_tokens=[], max_new_tokens=WHISPER_MAX_NEW_TOKENS, do_sample=False,
    )
    model.save_pretrained(out)
    processor.save_pretrained(out)


def build_bert(out: Path) -> None:
    """A 2-layer BERT encoder (hidden 64) with a WordPiece tokenizer (vocab.txt -> BertTokenizerFast)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    vocab_file = out / "vocab.txt"
    vocab_file.write_text("\n".join([*BERT_SPECIALS, *_words()]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True, model_max_length=512)
    torch.manual_seed(SEED)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=512, pad_token_id=0)
    BertModel(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)


BUILDERS = {"llama": build_llama, "whisper": build_whisper, "bert": build_bert}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the folder that gets one subfolder per model")
    parser.add_argument("models", nargs="+", choices=sorted(BUILDERS), metavar="MODEL",
                        help=f"one or more of {', '.join(sorted(BUILDERS))}")
    args = parser.parse_args()
    for name in args.models:
        BUILDERS[name](args.out / name)
        print(json.dumps({"model": name, "path": str(args.out / name)}), flush=True)


if __name__ == "__main__":
    main()
