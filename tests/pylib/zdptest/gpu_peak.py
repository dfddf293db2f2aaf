"""Dense bf16 tensor-core peak of an NVIDIA GPU, from its name, for the MFU of bench/gpu.

Shared by bench/gpu/torch_gpt2_cuda.py (the PyTorch peer prints its own MFU) and bench/gpu/report.py
(which computes zerodp's), so both divide by the same number. The figures are NVIDIA's datasheet "BF16 Tensor Core"
numbers for dense math: half of the "with sparsity" figure the datasheets print first.

Names as nvidia-smi and torch.cuda.get_device_name() give them, e.g. "NVIDIA H100 80GB HBM3" (SXM),
"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA GH200 480GB".
The first entry whose every word occurs in the name wins, so the more specific ones come first: a
PCIe or NVL card runs at a lower clock and power than the SXM part of the same name.
"""

PEAKS = [  # (words that must all be in the upper-cased name, dense bf16 FLOP/s, what it is)
    (("H100", "PCIE"), 756.5e12, "H100 PCIe"),
    (("H100", "NVL"), 835.5e12, "H100 NVL"),
    (("H200", "NVL"), 835.5e12, "H200 NVL"),
    (("GH200",), 989.4e12, "GH200"),
    (("H200",), 989.4e12, "H200 SXM"),
    (("H100",), 989.4e12, "H100 SXM"),
    (("A100",), 312e12, "A100"),
]


def dense_bf16_peak(name):
    """(FLOP/s or None, a note saying which figure was taken or why there is none)."""
    if not name:
        return None, "no GPU name: MFU not computed"
    upper = name.upper()
    for words, peak, label in PEAKS:
        if all(w in upper for w in words):
            return peak, f"{label}: {peak / 1e12:.1f} TFLOP/s dense bf16"
    return None, f"unknown GPU '{name}': no dense bf16 peak known (give --peak-tflops), MFU not computed"


def choose_peak(name, override_tflops=None):
    """The peak to divide by: override_tflops (TFLOP/s) when given, else the table's figure for name."""
    if override_tflops:
        return float(override_tflops) * 1e12, f"{float(override_tflops):.1f} TFLOP/s (given)"
    return dense_bf16_peak(name)
