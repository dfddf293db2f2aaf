#!/usr/bin/python3
"""FLOPs of one GPT-2 (or Llama: llama_step_flops) training step (forward + backward), counted matmul by matmul.

A matmul of an [M, K] by a [K, N] matrix is 2·M·N·K FLOPs forward; its backward computes the gradient
of both operands, two matmuls of the same size, so 2× the forward. Per step, for n = B·T tokens:

    per block:   c_attn 2·n·C·3C + attn.c_proj 2·n·C·C + c_fc 2·n·C·4C + mlp.c_proj 2·n·4C·C = 24·n·C²
                 attention, QKᵀ and P·V for every (sequence, head):
                   causal: query t meets t+1 keys: Σ_t 2·hs·(t+1) = hs·T(T+1) each, so 2·B·C·T(T+1)
                   dense:  2·hs·T² each, so 4·B·C·T² (what a kernel that ignores the mask computes)
    LM head:     logits = ln_f(x)·wteᵀ, 2·n·C·V
    step:        3 × forward (forward + backward at 2×).

Not counted: LayerNorm, GELU, softmax, cross-entropy, residuals, embeddings, AdamW (all O(n·C) or
O(params), a few percent at these sizes). The figures quoted in docs/benchmarks/ (training.md, gpu.md) use the causal count.
"""
import argparse
import json


def forward_flops(L, C, V, B, T, causal=True):
    n = B * T
    dense_per_block = 24 * n * C * C
    attention_per_block = 2 * B * C * T * (T + 1) if causal else 4 * B * C * T * T
    head = 2 * n * C * V
    return L * (dense_per_block + attention_per_block) + head


def step_flops(L, C, V, B, T, causal=True):
    """FLOPs of a training step of one rank's micro-batch (forward + backward)."""
    return 3 * forward_flops(L, C, V, B, T, causal)


def llama_forward_flops(L, C, q, kv, I, V, B, T, causal=True):
    """A Llama's forward (the Llama family of docs/reference/model.md): q = heads·head_dim, kv = kv_heads·head_dim.

    per block:   q_proj 2·n·C·q + k_proj, v_proj 2·n·C·kv each + o_proj 2·n·q·C + gate_proj, up_proj 2·n·C·I
                 each + down_proj 2·n·I·C; attention as GPT-2's with q in place of C (every query head meets
                 its keys, whichever head they are shared from): causal 2·B·q·T(T+1), dense 4·B·q·T²
    LM head:     2·n·C·V (tied or not)
    """
    n = B * T
    dense_per_block = n * (2 * C * (q + 2 * kv) + 2 * q * C + 6 * C * I)
    attention_per_block = 2 * B * q * T * (T + 1) if causal else 4 * B * q * T * T
    return L * (dense_per_block + attention_per_block) + 2 * n * C * V


def llama_step_flops(L, C, q, kv, I, V, B, T, causal=True):
    """FLOPs of a Llama training step of one rank's micro-batch (forward + backward)."""
    return 3 * llama_forward_flops(L, C, q, kv, I, V, B, T, causal)


def params(L, C, V, N):
    """GPT-2 parameter count (tied head): embeddings, L blocks, ln_f."""
    return V * C + N * C + L * (12 * C * C + 13 * C) + 2 * C


def main():
    ap = argparse.ArgumentParser(description="FLOPs of a GPT-2 training step")
    for k in ("layers", "embd", "vocab", "micro-batch", "seq"):
        ap.add_argument("--" + k, type=int, required=True)
    a = ap.parse_args()
    dims = (a.layers, a.embd, a.vocab, a.micro_batch, a.seq)
    print(json.dumps({"causal": step_flops(*dims, causal=True), "dense": step_flops(*dims, causal=False)}))


if __name__ == "__main__":
    main()
