"""Texts the test tokenizers never saw in training (they train on Shakespeare): many scripts, emoji,
digit and whitespace runs, CRLF, contractions, special tokens written in the text, combining marks.
Shared by tests/tokenizer/reference_test.py, tests/data/chat_tokenize_reference.py and
bench/tokenize/bench.py."""

DOCS = [
    "中文测试：你好，世界！今天天气很好，我们去公园散步吧。",
    "日本語のテキストです。カタカナとひらがな、漢字が混ざっています。",
    "مرحبا بالعالم، هذا نص عربي للاختبار.",
    "नमस्ते दुनिया, यह हिंदी में एक परीक्षण है।",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε· το γρήγορο καφέ αλεπού.",
    "Emoji: 👍 👍🏽 👩🏿‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️‍🔥 🇫🇷🇯🇵",
    "Digits: 1234567 3.14159 1,000,000 2024-05-20 0x7fff 99999999999999999999",
    "Whitespace    runs\t\ttabs \t mixed\n\n\n   indented\n \n\t\n",
    "Windows\r\nline\r\nendings\r\n\r\n",
    "trailing spaces   ",
    "   leading spaces",
    "Contractions: it's, I'LL, we've, they'd, YOU'RE, I'm, can't, 'S 'T 'Re",
    "special <|endoftext|> in the middle and <|begin_of_text|> and <|end_of_text|> and <|endoftext",
    "<|endoftext|><|endoftext|>twice",
    "Combining marks: e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f",
    "Mixed scripts: Hello世界123abc!!!???...---___",
    "Punctuation runs: !!!??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>>",
    "URL https://example.com/path?q=1&r=2#frag and e-mail someone@example.org",
    "Code: def f(x):\n    return x ** 2  # square\n\tif (a != b) { c++; }",
    "Unicode spaces:\u00a0nbsp\u2003em\u3000ideographic\u2028line\u2029para",
    "Zero width: a\u200bb\u200cc\u200dd\ufeffe",
    "Accents: café naïve résumé façade Ångström Øre",
    "한국어 텍스트도 있습니다. 안녕하세요!",
    "ไทย ภาษาไทย ทดสอบ",
    "עברית: שלום עולם",
    "Math: ∀x∈ℝ, ∃y: x²+y²≤1 ∑∫∂√∞",
    "",
    " ",
    "\n",
    "a",
    "KING RICHARD III:\nNow is the winter of our discontent\nMade glorious summer by this sun of York;",
    "x" * 300 + " " * 200 + "7" * 50,
    # runs of letters of 2 and 3 bytes longer than the regex search's window (256 bytes)
    "中文" * 150 + " Ünïcödé" * 3 + "é" * 301 + " ok",
    # where two regex engines could disagree
    "it'ſ x KK IT'S 's's'S x'LL'll",
    "a᠎b ab x  y   a 　　x v",
    "﻿hi a‍‍b 😀😀 1١٢٣ ½⅕",
    "  \n  \n\r\r\n\n a\x00b ́start x" + "́" * 40,
    # what normalizers change: compatibility characters (NFKC), composed and decomposed forms, marks
    # to reorder, Hangul jamo that compose, a character whose lowercase is two
    "Compatibility: \ufb01 \ufb02 \uff46\uff55\uff4c\uff4c \u2460 x\u00b2 \u3231 \u01c4 \u210c \u2122 \u3300 \u00bd "
    "\u017f \u212a \u212b \u00a0nbsp \u2126",
    "Decomposed: Cafe\u0301 re\u0301sume\u0301 A\u030a n\u0303 a\u0328\u0301 e\u0301\u0327 \u1e0b\u0323 \u0f73 \u0344",
    "Jamo: \u1100\u1161\u11a8 \uac00\u11a8 \u3131\u314f \u0b47\u0b3e \u0dd9\u0dcf \u0130stanbul \u0130I",
]
