"""The optional speed switch of the loop engine (``engine.channels_last``, off by default).

``channels_last`` stores the model's 4-D weights and its input batches in NHWC layout
(``engine=loop`` only: functorch's vmap cannot batch channels-last tensors). The numbers are the
same up to float32 rounding (tests/test_engine_equivalence.py). On the 2-core benchmark CPU it
gave no consistent gain: 0.99x, 1.13x and 0.88x the plain loop's speed on the three presets of
results/bench (within that machine's run-to-run noise), hence off by default. On the later AMD EPYC
machine it gave 1.73x on hbn_cifar10 and 1.51x on fedrbn_digits (Simple-CNN, B = 32; results/bench/README.md),
so the FedRBN Digits presets switch it on (conf/experiment/fedrbn/base/digits.yaml).

Measured and left out: ``torch.compile`` of the model on CPU (about 100 s of compilation for a
1.25x faster Simple-CNN step); bfloat16 autocast on CPU (slower on a CPU without bf16 kernels,
12.5 vs 9.9 ms per Simple-CNN step, and 2-round training loss 3.7 instead of 1.5 in the
equivalence setting). CUDA graphs and CUDA autocast need a GPU to test.
"""
from __future__ import annotations

import torch
from torch import nn


def to_channels_last(model: nn.Module) -> nn.Module:
    """Store the model's 4-D weights channels-last (state-dict values are unchanged)."""
    return model.to(memory_format=torch.channels_last)


def channels_last_input(x: torch.Tensor) -> torch.Tensor:
    """``x`` in channels-last layout when it is a 4-D image batch, else unchanged."""
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
