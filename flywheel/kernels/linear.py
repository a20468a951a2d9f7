"""`QuantLinear`: an `nn.Linear` stand-in whose weight is the GGUF's packed blocks, run by `qgemm.cpp`."""

from __future__ import annotations

import torch

from flywheel import kernels
from flywheel.kernels.blocks import Packed


class QuantLinear(torch.nn.Module):
    """y = x W^T + b with W held as packed blocks; every call goes through the kernel (batch-invariant)."""

    def __init__(self, packed: Packed, bias: torch.Tensor | None, mode: str, isa: str) -> None:
        super().__init__()
        self.in_features, self.out_features = packed.k, packed.n
        self.group, self.type_name = packed.group, packed.type_name
        self.mode, self.isa = mode, isa
        kernels.variant()   # built and loaded here, so the hot path below calls the op directly
        self._op = torch.ops.flywheel_qgemm.qlinear
        self._mode_id, self._isa_id = kernels.MODES[mode], kernels.VARIANTS.index(isa)
        self.register_buffer("codes", packed.codes, persistent=False)
        self.register_buffer("scales", packed.scales, persistent=False)
        self.register_buffer("offsets", packed.offsets, persistent=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().float().contiguous(), requires_grad=False)
        self._bias = self.bias if self.bias is not None else torch.empty(0, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float().contiguous()          # (M, K)
        y = self._op(rows, self.codes, self.scales, self.offsets, self._bias, self.out_features,
                     self.group, self._mode_id, self._isa_id)
        return y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.in_features} -> {self.out_features}, {self.type_name} blocks, {self.mode} on {self.isa}"


def install(model: torch.nn.Module, packed: dict[str, Packed], mode: str, isa: str) -> int:
    """Replace each `nn.Linear` named in `packed` by a `QuantLinear` (its fp32 weight is dropped unless tied
    to another module, e.g. the embedding); returns how many were replaced."""
    replaced = 0
    for name, p in packed.items():
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, leaf)
        if not isinstance(old, torch.nn.Linear) or (old.out_features, old.in_features) != (p.n, p.k):
            raise ValueError(f"{name} is not an nn.Linear of shape ({p.n}, {p.k})")
        setattr(parent, leaf, QuantLinear(p, old.bias, mode, isa))
        replaced += 1
    return replaced
