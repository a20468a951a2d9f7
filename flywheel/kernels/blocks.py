"""A GGUF file's quantized blocks as the kernel reads them: int8 codes x fp32 group scales (+ fp32 offsets).

Every block type the packaged models use is exactly `w = s * c (+ o)` with an integer code `c`, an fp32
scale `s` per group of G weights and, for the asymmetric types, an fp32 offset `o`; the products are exact
in fp32, so these three arrays reproduce the fp32 weights transformers' GGUF loader writes bit for bit.
`decode` reads them out of a tensor's raw bytes (the same unpacking as `gguf.quants`, keeping the codes
instead of multiplying them out); `pack` lays them out for `qgemm.cpp` (tiles of 16 output features, four
codes of a feature adjacent); `dequantize` multiplies them back, in the kernel's order, for the check that
every packed tensor equals the prepared fp32 weight.

| type | G | code | scale s | offset o |
|---|---|---|---|---|
| Q8_0 | 32 | int8 | d | - |
| Q5_0 | 32 | 0..31 - 16 | d | - |
| Q4_0 | 32 | 0..15 - 8 | d | - |
| Q4_1 | 32 | 0..15 | d | +m |
| Q4_K | 32 | 0..15 | d * sc | -(dmin * m) |
| Q6_K | 16 | 0..63 - 32 | d * sc | - |
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

#: Output features per tile (one AVX-512 register of fp32 lanes): `kTile` in qgemm.cpp.
TILE = 16


@dataclass(frozen=True)
class Blocks:
    """One weight matrix (N outputs, K inputs) as codes, scales and offsets (unpacked, row-major)."""

    type_name: str
    codes: np.ndarray            # (N, K) int16 (holds every type's code range)
    scales: np.ndarray           # (N, K // group) float32
    offsets: np.ndarray | None   # (N, K // group) float32, or None for symmetric types
    group: int

    def permute_rows(self, order: np.ndarray) -> Blocks:
        return Blocks(self.type_name, self.codes[order], self.scales[order],
                      None if self.offsets is None else self.offsets[order], self.group)


def _f16(raw: np.ndarray) -> np.ndarray:
    return raw.copy().view(np.float16).astype(np.float32)


def _q8_0(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    d, qs = _f16(b[:, :2]), b[:, 2:].copy().view(np.int8)
    return qs.astype(np.int16), d, None, 32


def _q5_0(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    d = _f16(b[:, :2])
    qh = b[:, 2:6].copy().view(np.uint32).reshape(-1, 1) >> np.arange(32, dtype=np.uint32).reshape(1, 32)
    ql = b[:, 6:].reshape(-1, 1, 16) >> np.array([0, 4], dtype=np.uint8).reshape(1, 2, 1)
    q = (ql & 0x0F).reshape(-1, 32).astype(np.int16) | ((qh & 1).astype(np.int16) << 4)
    return q - 16, d, None, 32


def _q4_0(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    d = _f16(b[:, :2])
    q = (b[:, 2:].reshape(-1, 1, 16) >> np.array([0, 4], dtype=np.uint8).reshape(1, 2, 1)) & 0x0F
    return q.reshape(-1, 32).astype(np.int16) - 8, d, None, 32


def _q4_1(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    d, m = _f16(b[:, :2]), _f16(b[:, 2:4])
    q = (b[:, 4:].reshape(-1, 1, 16) >> np.array([0, 4], dtype=np.uint8).reshape(1, 2, 1)) & 0x0F
    return q.reshape(-1, 32).astype(np.int16), d, m, 32


def _q4_k(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    from gguf.quants import Q4_K

    n = b.shape[0]
    d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
    sc, m = Q4_K.get_scale_min(b[:, 4:16].copy())
    qs = b[:, 16:].reshape(n, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    codes = (qs & 0x0F).reshape(n * 8, 32).astype(np.int16)            # 8 groups of 32 per block
    scales = (d * sc.astype(np.float32)).reshape(-1)                    # exact: 11 x 6 bits
    offsets = -(dmin * m.astype(np.float32)).reshape(-1)
    return codes, scales, offsets, 32


def _q6_k(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    n = b.shape[0]
    ql, qh = b[:, :128], b[:, 128:192]
    sc, d = b[:, 192:208].copy().view(np.int8).astype(np.float32), _f16(b[:, 208:210])
    lo = (ql.reshape(n, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & 0x0F
    hi = (qh.reshape(n, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & 0x03
    q = (lo.reshape(n, 8, 32).astype(np.int16) | (hi.reshape(n, 8, 32).astype(np.int16) << 4)) - 32
    return q.reshape(n * 16, 16), (d * sc).reshape(-1), None, 16


#: GGUF type name -> (bytes per block, weights per block, decoder).
DECODERS = {
    "Q8_0": (34, 32, _q8_0), "Q5_0": (22, 32, _q5_0), "Q4_0": (18, 32, _q4_0), "Q4_1": (20, 32, _q4_1),
    "Q4_K": (144, 256, _q4_k), "Q6_K": (210, 256, _q6_k),
}


def decode(type_name: str, raw: np.ndarray, n: int, k: int) -> Blocks:
    """The blocks of an (n, k) tensor of GGUF type `type_name` from its raw bytes (any shape, n*k weights).

    Raises KeyError for a type this module does not read (the caller keeps the fp32 weight then).
    """
    size, per, fn = DECODERS[type_name]
    blocks = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, size)
    if blocks.shape[0] * per != n * k:
        raise ValueError(f"{type_name} tensor holds {blocks.shape[0] * per} weights, expected {n} x {k}")
    codes, scales, offsets, group = fn(blocks)
    return Blocks(type_name, codes.reshape(n, k), scales.astype(np.float32).reshape(n, k // group),
                  None if offsets is None else offsets.astype(np.float32).reshape(n, k // group), group)


def dequantize(blocks: Blocks) -> torch.Tensor:
    """The fp32 weights (N, K) the blocks stand for, formed as the kernel forms them: fl(s*c) then + o."""
    codes = torch.from_numpy(blocks.codes.astype(np.float32))
    scales = torch.from_numpy(blocks.scales).repeat_interleave(blocks.group, dim=1)
    w = scales * codes
    if blocks.offsets is not None:
        w = w + torch.from_numpy(blocks.offsets).repeat_interleave(blocks.group, dim=1)
    return w


@dataclass(frozen=True)
class Packed:
    """`Blocks` in the kernel's layout (see qgemm.cpp): what a `QuantLinear` holds."""

    codes: torch.Tensor           # uint8 (NT * K/4 * 16 * 4,): code + 128
    scales: torch.Tensor          # float32 (NT, K/G, 16)
    offsets: torch.Tensor         # float32 (NT, K/G, 16), or empty
    n: int
    k: int
    group: int
    type_name: str


def pack(blocks: Blocks) -> Packed:
    """Tiles of 16 output features; within a tile, for each 4 inputs, 16 x 4 code bytes. Rows past N are
    zero codes with zero scales (their outputs are never stored).

    Raises ValueError for K not a multiple of 32, or a code outside -127..127 (no ggml quantizer writes
    -128; the AVX2 path's sign trick could not take it): the caller keeps that tensor's fp32 weight.
    """
    n, k = blocks.codes.shape
    if k % 32:
        raise ValueError(f"the kernel needs K divisible by 32, got {k}")
    if blocks.codes.size and (int(blocks.codes.min()) < -127 or int(blocks.codes.max()) > 127):
        raise ValueError(f"{blocks.type_name} codes outside -127..127")
    nt = -(-n // TILE)
    codes = np.full((nt * TILE, k), 128, dtype=np.uint8)                      # code + 128; padding codes 0
    codes[:n] = (blocks.codes + 128).astype(np.uint8)
    tiled = codes.reshape(nt, TILE, k // 4, 4).transpose(0, 2, 1, 3)          # (NT, K/4, 16, 4)

    def tile(a: np.ndarray) -> torch.Tensor:
        full = np.zeros((nt * TILE, a.shape[1]), dtype=a.dtype)
        full[:n] = a[:n]
        return torch.from_numpy(np.ascontiguousarray(full.reshape(nt, TILE, -1).transpose(0, 2, 1)))

    offsets = tile(blocks.offsets) if blocks.offsets is not None else torch.empty(0, dtype=torch.float32)
    return Packed(torch.from_numpy(np.ascontiguousarray(tiled).reshape(-1)), tile(blocks.scales), offsets,
                  n, k, blocks.group, blocks.type_name)


def dequantize_packed(p: Packed) -> torch.Tensor:
    """The fp32 weights (N, K) of packed blocks: `pack` undone, then `dequantize`."""
    nt = p.scales.shape[0]
    codes = p.codes.reshape(nt, p.k // 4, TILE, 4).permute(0, 2, 1, 3).reshape(nt * TILE, p.k)[:p.n]
    def untile(a: torch.Tensor) -> np.ndarray:
        return a.permute(0, 2, 1).reshape(nt * TILE, -1)[:p.n].numpy()
    blocks = Blocks(p.type_name, codes.numpy().astype(np.int16) - 128, untile(p.scales),
                    untile(p.offsets) if p.offsets.numel() else None, p.group)
    return dequantize(blocks)
