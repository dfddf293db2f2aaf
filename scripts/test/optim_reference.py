#!/usr/bin/env python3
"""Runs torch.optim.AdamW or torch.optim.SGD for the optim tests (tests/optim/test_optim_torch.cpp).

Usage: optim_reference.py DIR [DIR ...]   (one run per DIR; exits 77 when torch cannot be imported)

Reads DIR/spec.json:
    {"optimizer": "adamw" | "sgd", "shapes": [[r, c], [n], ...], "decay": [true, false, ...],
     "lrs": [lr of each step], "grad_scales": [scale of each step],
     "beta1", "beta2", "eps", "weight_decay", "momentum", "dampening", "nesterov"}
DIR/params.bin (float32, the tensors' initial values laid end to end) and DIR/grads.bin (float32,
one such block per step). Tensors with decay true go in a parameter group with the weight decay,
the others in a group with weight decay 0. Each step sets every group's lr, sets p.grad to the
step's gradient times its scale (a float32 multiply, as gradient clipping does), and steps.
Writes DIR/out_params.bin and DIR/out_state.bin (AdamW: every exp_avg end to end, then every
exp_avg_sq; SGD: every momentum buffer; nothing for SGD without momentum).
"""
import json
import pathlib
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # the C++ test fails, quoting this
    print(f"cannot import torch/numpy: {e}", file=sys.stderr)
    sys.exit(77)


def run(work: pathlib.Path) -> None:
    spec = json.loads((work / "spec.json").read_text())
    sizes = [int(np.prod(s)) for s in spec["shapes"]]
    total = sum(sizes)
    flat = np.fromfile(work / "params.bin", dtype=np.float32)
    grads = np.fromfile(work / "grads.bin", dtype=np.float32).reshape(len(spec["lrs"]), total)
    assert flat.size == total, (flat.size, total)

    params, start = [], 0
    for shape, size in zip(spec["shapes"], sizes):
        params.append(torch.nn.Parameter(torch.from_numpy(flat[start:start + size].copy()).reshape(shape)))
        start += size
    decayed = [p for p, d in zip(params, spec["decay"]) if d]
    plain = [p for p, d in zip(params, spec["decay"]) if not d]
    groups = [{"params": decayed, "weight_decay": spec["weight_decay"]},
              {"params": plain, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]

    if spec["optimizer"] == "adamw":
        opt = torch.optim.AdamW(groups, lr=spec["lrs"][0], betas=(spec["beta1"], spec["beta2"]),
                                eps=spec["eps"], foreach=False)
    elif spec["optimizer"] == "sgd":
        opt = torch.optim.SGD(groups, lr=spec["lrs"][0], momentum=spec["momentum"],
                              dampening=spec["dampening"], nesterov=spec["nesterov"], foreach=False)
    else:
        raise SystemExit(f"unknown optimizer {spec['optimizer']}")

    for step, (lr, scale) in enumerate(zip(spec["lrs"], spec["grad_scales"])):
        for group in opt.param_groups:
            group["lr"] = lr
        start = 0
        for p, size in zip(params, sizes):
            g = torch.from_numpy(grads[step, start:start + size].copy()).reshape(p.shape)
            p.grad = g.mul_(torch.tensor(scale, dtype=torch.float32))
            start += size
        opt.step()

    with torch.no_grad():
        np.concatenate([p.detach().numpy().ravel() for p in params]).astype(np.float32).tofile(
            work / "out_params.bin")
        if spec["optimizer"] == "adamw":
            planes = [opt.state[p]["exp_avg"] for p in params] + [opt.state[p]["exp_avg_sq"] for p in params]
        elif spec["momentum"] != 0:
            planes = [opt.state[p]["momentum_buffer"] for p in params]
        else:
            planes = []
        state = np.concatenate([t.numpy().ravel() for t in planes]) if planes else np.zeros(0)
        state.astype(np.float32).tofile(work / "out_state.bin")


def main() -> int:
    torch.set_num_threads(1)
    for d in sys.argv[1:]:
        run(pathlib.Path(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
