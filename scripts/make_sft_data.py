#!/usr/bin/env python3
"""The instruction data of scripts/demo_sft.sh: the speeches of data/tinyshakespeare.txt as
conversations in TRL's format, each a user's speech and the assistant's reply (the speech after it,
in the play), both cut to their first MAX_LINES lines:

  {"messages": [{"role": "user", "content": speech i}, {"role": "assistant", "content": speech i + 1}]}

The last VAL_FRACTION of the conversations (in play order) are held out for validation. Also writes
a tokenizer_config.json with a chat template for the repository's BPE tokenizer (whose only special
token is <|endoftext|>: each turn is "role: content<|endoftext|>" on its own line, the reply prompted by
"assistant: ").

usage: make_sft_data.py CORPUS OUT_DIR     (writes OUT_DIR/train.jsonl, val.jsonl, tokenizer_config.json)
"""
import json
import os
import sys

MAX_LINES = 1
VAL_FRACTION = 0.05
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{{ eos_token }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def speeches(text):
    """The play's speeches in order: the lines after each "SPEAKER:" line up to the blank line."""
    for block in text.split("\n\n"):
        lines = block.strip("\n").split("\n")
        if len(lines) >= 2 and lines[0].endswith(":"):
            yield "\n".join(lines[1:1 + MAX_LINES])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    corpus, out = sys.argv[1], sys.argv[2]
    with open(corpus, encoding="utf-8") as f:
        said = list(speeches(f.read()))
    conversations = [{"messages": [{"role": "user", "content": a}, {"role": "assistant", "content": b}]}
                     for a, b in zip(said, said[1:])]
    held_out = max(1, int(len(conversations) * VAL_FRACTION))
    os.makedirs(out, exist_ok=True)
    for name, part in (("train.jsonl", conversations[:-held_out]), ("val.jsonl", conversations[-held_out:])):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            for c in part:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"eos_token": "<|endoftext|>", "chat_template": CHAT_TEMPLATE}, f, indent=2)
    print(f"{len(conversations) - held_out} conversations for training, {held_out} held out, in {out}")


if __name__ == "__main__":
    main()
