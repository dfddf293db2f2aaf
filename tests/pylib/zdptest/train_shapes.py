"""Trains, with Hugging Face `tokenizers`, tokenizers built like published ones that normalize text:
Qwen 2.5's (a byte-level BPE with an NFC normalizer and Qwen 2's regex) and the SentencePiece-style
BPEs of Llama 2 (a Prepend + Replace normalizer, no pre-tokenizer) and Mistral (a Metaspace
pre-tokenizer), both with byte fallback: the 256 <0xAB> tokens in the vocabulary, the unknown token
<unk>, and the post-processor's template "<s> $A". Used by tests/tokenizer/reference_test.py,
tests/data/chat_tokenize_reference.py and bench/tokenize."""
import json

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
BYTE_TOKENS = ["<0x%02X>" % b for b in range(256)]
SPECIALS = ["<unk>", "<s>", "</s>"]


def train_qwen25(files, vocab_size, normalizer=None):
    t = Tokenizer(models.BPE())
    t.normalizer = normalizer or normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train(files, trainer)
    return t


def _sentencepiece_style(files, vocab_size, split_words):
    """A BPE over characters with byte fallback, trained on words that start with "▁" (split_words) or
    on whole lines (merges then cross the "▁" between words)."""
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    if split_words:
        t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS + BYTE_TOKENS, show_progress=False)
    t.train(files, trainer)
    # The byte tokens are the model's, not added tokens (as in Llama 2's file): written literally in a
    # text they are text.
    j = json.loads(t.to_str())
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] in SPECIALS]
    return j


def _template_json():
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}


LLAMA2_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def train_llama2(files, vocab_size, split_words=True):
    """Llama 2's shape: normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer, byte
    fallback, fuse_unk, the decoder Replace/ByteFallback/Fuse/Strip, the template "<s> $A"."""
    j = _sentencepiece_style(files, vocab_size, split_words)
    j["pre_tokenizer"] = None
    j["decoder"] = LLAMA2_DECODER
    j["post_processor"] = _template_json()
    return Tokenizer.from_str(json.dumps(j))


def train_mistral(files, vocab_size, prepend_scheme="first", split=False):
    """The shape of recent Mistral (and Llama 2) conversions: no normalizer, a Metaspace pre-tokenizer
    (prepend_scheme "first", split false) and Metaspace decoder, byte fallback, the template "<s> $A"."""
    j = _sentencepiece_style(files, vocab_size, True)
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": prepend_scheme, "split": split}
    j["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": prepend_scheme, "split": split}
    j["post_processor"] = _template_json()
    return Tokenizer.from_str(json.dumps(j))


TRAINERS = {"qwen25": train_qwen25, "llama2": train_llama2, "mistral": train_mistral}
