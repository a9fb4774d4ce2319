"""``SegmentationNet``: a small encoder-decoder for dense prediction (a convolutional
backbone and a light feature-pyramid decoder), whose backbone stages can each run under
``torch.utils.checkpoint`` (``use_reentrant=False``). Shown in chapter 20.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["SegmentationNet", "CHECKPOINT_MODES"]


CHECKPOINT_MODES = ("none", "backbone", "all")


def _conv_stage(c_in: int, c_out: int, depth: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Conv2d(c_in if i == 0 else c_out, c_out, 3, padding=1), nn.ReLU()]
    return nn.Sequential(*layers)


class _Merge(nn.Module):
    """Decoder stage (FPN-style): upsample the coarser map by 2, add a 1×1 projection
    of the encoder's skip at this resolution, then a 3×3 convolution with ReLU.

    ``(b, width, H/2, W/2), (b, c_skip, H, W) -> (b, width, H, W)``.
    """

    def __init__(self, c_skip: int, width: int):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.lateral = nn.Conv2d(c_skip, width, 1)
        self.smooth = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU())

    def forward(self, coarse: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.smooth(self.up(coarse) + self.lateral(skip))


class SegmentationNet(nn.Module):
    """A small encoder-decoder network for per-pixel classification (segmentation).

    ``(batch, in_channels, H, W) -> (batch, n_classes, H, W)`` logits.

    The encoder (the "backbone") has one stage per entry of ``widths``: ``depth``
    3×3 convolutions with ReLU, each stage after the first preceded by a 2×2 max-pool,
    so stage *i* works at resolution H/2^i. The decoder is light, as in feature-pyramid
    segmentation heads: starting from a 1×1 projection of the coarsest stage, it
    climbs back one resolution at a time (upsample, add a 1×1 projection of the encoder
    output at that resolution, a 3×3 convolution with ReLU, all ``decoder_width``
    channels wide); a 1×1 convolution gives the class logits. H and W must be divisible
    by 2^(len(widths) - 1). There is no normalisation layer: BatchNorm's running
    statistics would be updated twice under checkpointing (chapter 8).

    ``checkpoint``: ``"none"`` (keep everything), ``"backbone"`` (each encoder stage
    under ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``), or
    ``"all"`` (decoder stages too). An attribute, so it can be changed between steps.

    Shown in chapter 20.
    """

    def __init__(self, in_channels: int = 3, n_classes: int = 4,
                 widths: Sequence[int] = (16, 32, 64), depth: int = 3,
                 decoder_width: int = 16, checkpoint: str = "none"):
        super().__init__()
        widths = tuple(widths)
        for name, vals in (("widths", widths), ("depth", (depth,)),
                           ("decoder_width", (decoder_width,)),
                           ("in_channels", (in_channels,)), ("n_classes", (n_classes,))):
            if not vals or any(isinstance(v, bool) or int(v) != v or v < 1 for v in vals):
                raise ValueError(f"{name} must be positive integers, got {vals if name == 'widths' else vals[0]!r}")
        self.in_channels, self.n_classes, self.widths = in_channels, n_classes, widths
        self.checkpoint = checkpoint
        self.encoder = nn.ModuleList()
        c = in_channels
        for i, w in enumerate(widths):
            stage = _conv_stage(c, w, depth)
            self.encoder.append(nn.Sequential(nn.MaxPool2d(2), stage) if i else stage)
            c = w
        self.top = nn.Conv2d(widths[-1], decoder_width, 1)
        self.decoder = nn.ModuleList(_Merge(widths[i], decoder_width)
                                     for i in reversed(range(len(widths) - 1)))
        self.head = nn.Conv2d(decoder_width, n_classes, 1)

    @property
    def checkpoint(self) -> str:
        return self._checkpoint

    @checkpoint.setter
    def checkpoint(self, mode: str) -> None:
        if mode not in CHECKPOINT_MODES:
            raise ValueError(f"checkpoint must be one of {CHECKPOINT_MODES}, got {mode!r}")
        self._checkpoint = mode

    @property
    def divisor(self) -> int:
        """H and W must be multiples of this (one halving per stage after the first)."""
        return 2 ** (len(self.widths) - 1)

    @staticmethod
    def _run(module: nn.Module, *args: torch.Tensor, ckpt: bool) -> torch.Tensor:
        if ckpt and torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint
            return checkpoint(module, *args, use_reentrant=False)
        return module(*args)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"expected input (batch, {self.in_channels}, H, W), got {tuple(x.shape)}")
        if x.shape[2] % self.divisor or x.shape[3] % self.divisor:
            raise ValueError(f"H and W must be multiples of {self.divisor}, got {tuple(x.shape[2:])}")
        ck_enc = self.checkpoint in ("backbone", "all")
        ck_dec = self.checkpoint == "all"
        skips = []
        for stage in self.encoder:
            x = self._run(stage, x, ckpt=ck_enc)
            skips.append(x)
        x = self.top(x)
        for merge, skip in zip(self.decoder, reversed(skips[:-1])):
            x = self._run(merge, x, skip, ckpt=ck_dec)
        return self.head(x)
