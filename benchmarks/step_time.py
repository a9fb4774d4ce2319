"""Training-step time: minigrad against torch on the CPU, and what checkpointing costs.

Prints, from one run on one machine with one thread count:

1. a float32 training step (forward, backward, AdamW) of the same model in
   minigrad and in torch: an 8-layer MLP (width 1024, batch 64) and a 4-block
   GPT (width 256, 4 heads, sequence 128, batch 8, vocabulary 512);
   target: minigrad / torch <= 1.5;
2. the step-time ratio with sqrt(n) checkpointing over none (and with every
   block checkpointed), for minigrad and for torch;
   target: <= 1.4 (theory: at most 4/3 when backward costs twice a forward
   and everything is recomputed once).

Usage::

    .venv/bin/python benchmarks/step_time.py [--threads 1] [--repeats 7] [--warmup 2]

Threads: the script sets ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
``MKL_NUM_THREADS`` and ``VECLIB_MAXIMUM_THREADS`` *before* NumPy and torch are
imported (NumPy's BLAS reads them only at load time) and calls
``torch.set_num_threads``, so both libraries use the same count. Each figure
is the median of ``--repeats`` timed steps after ``--warmup`` untimed ones,
configurations timed round-robin. With one thread the clock is the process's
CPU time (``--clock cpu``), which other programs on a shared machine do not
inflate; use ``--clock wall`` on an idle machine or with several threads.
Times vary from run to run; the ratios are what to read.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="threads for NumPy's BLAS and torch (default 1)")
    ap.add_argument("--repeats", type=int, default=7, help="timed steps per configuration (median)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before timing")
    ap.add_argument("--only", choices=["mlp", "gpt"], default=None, help="run one model only")
    ap.add_argument("--clock", choices=["auto", "cpu", "wall"], default="auto",
                    help="cpu: process CPU time (robust to other load; one thread only); "
                         "wall: perf_counter; auto (default): cpu with --threads 1, else wall")
    args = ap.parse_args(argv)
    if args.clock == "auto":
        args.clock = "cpu" if args.threads == 1 else "wall"
    if args.clock == "cpu" and args.threads != 1:
        ap.error("--clock cpu sums the CPU time of all threads; use --clock wall with --threads > 1")
    if args.threads < 1 or args.repeats < 1 or args.warmup < 0:
        ap.error("--threads and --repeats must be >= 1, --warmup >= 0")
    return args


ARGS = parse_args()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread variables)
import torch  # noqa: E402
from torch import nn as tnn  # noqa: E402
from torch.nn import functional as TF  # noqa: E402
from torch.utils.checkpoint import checkpoint as t_checkpoint  # noqa: E402
from torch.utils.checkpoint import checkpoint_sequential as t_checkpoint_sequential  # noqa: E402

import minigrad  # noqa: E402
from minigrad import nn, optim  # noqa: E402
from minigrad import ops as F  # noqa: E402
from minigrad import plan as P  # noqa: E402
from minigrad.checkpoint import checkpoint_sequential  # noqa: E402

torch.set_num_threads(ARGS.threads)
# On a shared machine wall time includes the time other processes hold the core;
# with one thread the process's CPU time is the work of the step itself.
CLOCK = time.process_time if ARGS.clock == "cpu" else time.perf_counter

# --- sizes (the issue's) -----------------------------------------------------------------
MLP_LAYERS, MLP_WIDTH, MLP_BATCH = 8, 1024, 64
GPT_BLOCKS, GPT_WIDTH, GPT_HEADS, GPT_SEQ, GPT_BATCH, GPT_VOCAB = 4, 256, 4, 128, 8, 512


def torch_segments(functions, starts, x):
    """torch's checkpoint_sequential with explicit segment starts (the same split as
    minigrad's, which a segment count cannot always express): every segment but the last
    in a non-reentrant checkpoint."""
    functions = list(functions)
    bounds = list(starts) + [len(functions)]

    def run(a, b):
        def f(h):
            for layer in functions[a:b]:
                h = layer(h)
            return h
        return f
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        x = t_checkpoint(run(a, b), x, use_reentrant=False)
    return run(bounds[-2], bounds[-1])(x)


def median_steps(steps, repeats=ARGS.repeats, warmup=ARGS.warmup):
    """Median wall time (seconds) of each ``step()`` in ``steps`` over ``repeats`` calls.

    The steps are timed round-robin (one call of each, then the next round), so a
    slow spell of the machine affects every configuration alike."""
    for step in steps:
        for _ in range(warmup):
            step()
    times = [[] for _ in steps]
    for _ in range(repeats):
        for i, step in enumerate(steps):
            t0 = CLOCK()
            step()
            times[i].append(CLOCK() - t0)
    return [statistics.median(t) for t in times]


# --- MLP: 8 blocks of Linear(1024, 1024) + ReLU (no ReLU after the last) ------------------
def mlp_minigrad(segments):
    """segments: None (no checkpointing) or what checkpoint_sequential accepts."""
    minigrad.random.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(MLP_WIDTH, MLP_WIDTH), nn.ReLU()) for _ in range(MLP_LAYERS - 1)]
    blocks.append(nn.Linear(MLP_WIDTH, MLP_WIDTH))
    params = [p for b in blocks for p in b.parameters()]
    opt = optim.AdamW(params, lr=1e-3)
    rng = np.random.default_rng(0)
    x = minigrad.Tensor(rng.standard_normal((MLP_BATCH, MLP_WIDTH)).astype(np.float32))
    y = minigrad.Tensor(rng.standard_normal((MLP_BATCH, MLP_WIDTH)).astype(np.float32))

    def step():
        opt.zero_grad()
        if segments is None:
            h = x
            for b in blocks:
                h = b(h)
        else:
            h = checkpoint_sequential(blocks, segments, x)
        F.mse_loss(h, y).backward()
        opt.step()
    return step


def mlp_torch(segments):
    torch.manual_seed(0)
    blocks = [tnn.Sequential(tnn.Linear(MLP_WIDTH, MLP_WIDTH), tnn.ReLU()) for _ in range(MLP_LAYERS - 1)]
    blocks.append(tnn.Linear(MLP_WIDTH, MLP_WIDTH))
    model = tnn.Sequential(*blocks)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(MLP_BATCH, MLP_WIDTH)
    y = torch.randn(MLP_BATCH, MLP_WIDTH)

    def step():
        opt.zero_grad()
        if segments is None:
            h = model(x)
        elif isinstance(segments, list):
            h = torch_segments(model, segments, x)
        else:
            h = t_checkpoint_sequential(model, segments, x, use_reentrant=False)
        TF.mse_loss(h, y).backward()
        opt.step()
    return step


# --- GPT ----------------------------------------------------------------------------------
class TorchBlock(tnn.Module):
    """The same pre-LN block as minigrad.nn.TransformerBlock (tanh GELU, causal SDPA)."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = tnn.LayerNorm(d), tnn.LayerNorm(d)
        self.qkv, self.proj = tnn.Linear(d, 3 * d), tnn.Linear(d, d)
        self.fc, self.fc_proj = tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.fc_proj(TF.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TorchGPT(tnn.Module):
    def __init__(self, checkpoint_blocks):
        super().__init__()
        self.tok = tnn.Embedding(GPT_VOCAB, GPT_WIDTH)
        self.pos = tnn.Embedding(GPT_SEQ, GPT_WIDTH)
        self.blocks = tnn.ModuleList([TorchBlock(GPT_WIDTH, GPT_HEADS) for _ in range(GPT_BLOCKS)])
        self.ln_f = tnn.LayerNorm(GPT_WIDTH)
        self.head = tnn.Linear(GPT_WIDTH, GPT_VOCAB, bias=False)
        self.checkpoint_blocks = checkpoint_blocks

    def forward(self, idx):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        cb = self.checkpoint_blocks
        if cb is True:
            for blk in self.blocks:
                h = t_checkpoint(blk, h, use_reentrant=False)
        elif cb is False:
            for blk in self.blocks:
                h = blk(h)
        elif isinstance(cb, list):
            h = torch_segments(self.blocks, cb, h)
        else:
            h = t_checkpoint_sequential(self.blocks, cb, h, use_reentrant=False)
        return self.head(self.ln_f(h))


def gpt_data():
    rng = np.random.default_rng(0)
    idx = rng.integers(0, GPT_VOCAB, (GPT_BATCH, GPT_SEQ))
    return idx, rng.integers(0, GPT_VOCAB, (GPT_BATCH, GPT_SEQ))


def gpt_minigrad(checkpoint_blocks):
    minigrad.random.manual_seed(0)
    model = nn.GPT(nn.GPTConfig(GPT_VOCAB, GPT_WIDTH, GPT_HEADS, GPT_BLOCKS, GPT_SEQ, dropout=0.0,
                                checkpoint_blocks=checkpoint_blocks))
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    idx, targets = gpt_data()

    def step():
        opt.zero_grad()
        model.loss(idx, targets).backward()
        opt.step()
    return step


def gpt_torch(checkpoint_blocks):
    torch.manual_seed(0)
    model = TorchGPT(checkpoint_blocks)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx, targets = (torch.from_numpy(a) for a in gpt_data())

    def step():
        opt.zero_grad()
        logits = model(idx)
        TF.cross_entropy(logits.reshape(-1, GPT_VOCAB), targets.reshape(-1)).backward()
        opt.step()
    return step


def time_configs(model: str, minigrad_step, torch_step, configs) -> list:
    """Median step times of each (name, minigrad setting, torch setting) in ``configs``,
    all steps interleaved; rows of (model, name, minigrad seconds, torch seconds)."""
    steps = [f for _, mine, theirs in configs for f in (minigrad_step(mine), torch_step(theirs))]
    t = median_steps(steps)
    return [(model, name, t[2 * i], t[2 * i + 1]) for i, (name, _, _) in enumerate(configs)]


def main():
    print(f"threads={ARGS.threads} (torch.get_num_threads()={torch.get_num_threads()}), "
          f"repeats={ARGS.repeats} (median), warmup={ARGS.warmup}, clock={ARGS.clock}; numpy {np.__version__}, "
          f"torch {torch.__version__}, python {sys.version.split()[0]}")
    rows = []  # (model, config, minigrad s, torch s)
    if ARGS.only in (None, "mlp"):
        sq = P.sqrt_segments(MLP_LAYERS)
        # both get the same segment starts (torch through one checkpoint per segment)
        rows += time_configs(f"MLP {MLP_LAYERS}x{MLP_WIDTH}, batch {MLP_BATCH}", mlp_minigrad, mlp_torch,
                             (("no checkpointing", None, None),
                              (f"sqrt(n): starts {list(sq.starts)}", list(sq.starts), list(sq.starts)),
                              ("every block", MLP_LAYERS, MLP_LAYERS)))
    if ARGS.only in (None, "gpt"):
        sq = P.sqrt_segments(GPT_BLOCKS)
        rows += time_configs(f"GPT {GPT_BLOCKS} blocks, d={GPT_WIDTH}, s={GPT_SEQ}, b={GPT_BATCH}",
                             gpt_minigrad, gpt_torch,
                             (("no checkpointing", False, False),
                              (f"sqrt(n): starts {list(sq.starts)}", list(sq.starts), list(sq.starts)),
                              ("every block", True, True)))

    w = max(len(r[0]) for r in rows)
    c = max(len(r[1]) for r in rows)
    print(f"\n{'model':<{w}}  {'checkpointing':<{c}}  {'minigrad ms':>11}  {'torch ms':>9}  {'minigrad/torch':>14}")
    for model, cfg, m, t in rows:
        print(f"{model:<{w}}  {cfg:<{c}}  {m * 1e3:11.1f}  {t * 1e3:9.1f}  {m / t:14.2f}")

    print("\nTargets: minigrad/torch <= 1.5 (no checkpointing); checkpointed/none <= 1.4 (theory <= 4/3)")
    for model in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == model]
        base_m, base_t = mine[0][2], mine[0][3]
        ok = "OK" if base_m / base_t <= 1.5 else "MISSED"
        print(f"{model}: minigrad/torch = {base_m / base_t:.2f} [{ok}]")
        for _, cfg, m, t in mine[1:]:
            ok = "OK" if m / base_m <= 1.4 else "MISSED"
            print(f"  {cfg}: checkpointed/none minigrad = {m / base_m:.2f} [{ok}], torch = {t / base_t:.2f}")


if __name__ == "__main__":
    main()
