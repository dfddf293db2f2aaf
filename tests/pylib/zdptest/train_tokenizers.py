"""Trains, with Hugging Face `tokenizers`, the two byte-level BPE shapes zerodp reads: GPT-2's (a
ByteLevel pre-tokenizer with GPT-2's regex, <|endoftext|>) and Llama 3's (Sequence[Split(Llama 3's
regex, Isolated), ByteLevel(use_regex=False)], ignore_merges, <|begin_of_text|> and <|end_of_text|>).
Shared by tests/tokenizer/reference_test.py, scripts/make_tokenizer.py and bench/tokenize/bench.py; needs
`tokenizers` (the venv of scripts/setup/tokenizer_venv.sh)."""
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def train_gpt2(files, vocab_size):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train(files, trainer)
    return t


def train_llama3(files, vocab_size):
    t = Tokenizer(models.BPE(ignore_merges=True))
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train(files, trainer)
    return t


TRAINERS = {"gpt2": train_gpt2, "llama3": train_llama3}
