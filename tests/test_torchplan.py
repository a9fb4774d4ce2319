"""bookkit.torchplan: minigrad's chain planners on a PyTorch GPT-style block stack (CPU).
The profile's predictions are measured: the bytes autograd holds at the end of the
forward pass (SavedTensorMeter) and the FLOPs recomputed (FlopCounterMode), exactly."""
import pytest

torch = pytest.importorskip("torch")

from bookkit.torchmem import SavedTensorMeter  # noqa: E402
from bookkit.torchmodels import GPTBlock  # noqa: E402
from bookkit.torchplan import (forward_flops, profile_blocks, run_plan,  # noqa: E402
                               saved_after_forward)
from minigrad import plan  # noqa: E402
from torch_blocks import Detached, LinTanh, WritesInput, WritesWeight  # noqa: E402


def _stack(n=6):
    torch.manual_seed(0)
    blocks = [GPTBlock(32, 4, dropout=0.0) for _ in range(n)]
    x = torch.randn(2, 16, 32, requires_grad=True)
    return blocks, x


def _loss(y):
    return y.square().mean()


def test_segment_plans_hold_and_recompute_what_the_profile_predicts():
    blocks, x = _stack()
    profile = profile_blocks(blocks, x, loss=_loss)
    assert profile.cost[0] > 0 and profile.own_bytes[0] > 0
    params = torch.nn.ModuleList(blocks)
    everything = plan.explicit(6, [0])
    plain = forward_flops(lambda: _loss(run_plan(blocks, everything, x)).backward())
    budget = saved_after_forward(profile, plan.explicit(6, [0, 3]))
    chosen = plan.optimal_segments(profile, budget_bytes=3 * budget)
    for p in (everything, plan.explicit(6, [0, 3]), plan.explicit(6, [0, 2, 4]), chosen):
        with SavedTensorMeter(params=params) as meter:
            out = _loss(run_plan(blocks, p, x))
            held = meter.live_bytes
        out.backward()
        assert held == saved_after_forward(profile, p)
        total = forward_flops(lambda p=p: _loss(run_plan(blocks, p, x)).backward())
        assert total - plain == plan.recompute_cost(profile, p)


def test_a_nested_rotor_schedule_recomputes_its_predicted_flops():
    blocks, x = _stack()
    profile = profile_blocks(blocks, x, loss=_loss)
    s = plan.rotor(profile)  # the smallest peak: nested checkpoints
    assert s.depth >= 1
    plain = forward_flops(lambda: _loss(run_plan(blocks, plan.explicit(6, [0]), x)).backward())
    total = forward_flops(lambda: _loss(run_plan(blocks, s, x)).backward())
    assert total - plain == s.recompute_cost
    # gradients equal a plain step's (no dropout: deterministic)
    x.grad = None
    _loss(run_plan(blocks, s, x)).backward()
    want = x.grad.clone()
    x.grad = None
    _loss(run_plan(blocks, plan.explicit(6, [0]), x)).backward()
    assert torch.allclose(want, x.grad, rtol=0, atol=0)


def test_run_plan_refuses_other_plans():
    blocks, x = _stack(2)
    with pytest.raises(TypeError, match="SegmentPlan or a NestedSchedule"):
        run_plan(blocks, [0, 1], x)


def test_profiling_and_tracing_leave_the_model_as_they_found_it():
    """A profiling pass runs the blocks in training mode: BatchNorm's running
    statistics and batch count would move (twice per block in profile_blocks)."""
    from bookkit.torchplan import measure_step, trace_torch_graph
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8),
                                  torch.nn.Dropout(0.25), torch.nn.GELU())
              for _ in range(3)]
    x = torch.randn(6, 8, requires_grad=True)
    before = [{k: v.clone() for k, v in b.state_dict().items()} for b in blocks]
    rng = torch.get_rng_state()
    profile = profile_blocks(blocks, x, loss=_loss)
    trace_torch_graph(blocks, x, loss=_loss)
    assert torch.equal(rng, torch.get_rng_state())  # (a step draws dropout's)
    step = measure_step(blocks, x, _loss,
                        run=lambda h: run_plan(blocks, plan.rotor(profile), h))
    for b, old in zip(blocks, before):
        for k, v in b.state_dict().items():
            assert torch.equal(v, old[k]), k
    assert len(step.grads) == 3 * 4 + 1


def test_recomputation_leaves_running_statistics_as_a_plain_step_does():
    """torch's checkpoint re-runs BatchNorm in backward, which counts the batch
    again; run_plan lets only each block's first run update its statistics."""
    import copy
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8),
                                  torch.nn.GELU()) for _ in range(5)]
    x = torch.randn(6, 8, requires_grad=True)
    profile = profile_blocks(blocks, x, loss=_loss)
    plain = copy.deepcopy(blocks)
    _loss(torch.nn.Sequential(*plain)(x)).backward()
    nested = plan.rotor(profile)  # the smallest peak: blocks re-run up to 5 times
    assert nested.depth >= 2
    for schedule in (nested, plan.explicit(5, [0, 2])):
        ran = copy.deepcopy(blocks)
        _loss(run_plan(ran, schedule, x)).backward()
        assert_as_one_plain_step(ran, plain)


def assert_as_one_plain_step(ran, plain):
    """Blocks (Linear, BatchNorm, ...) after one step: running statistics that
    counted the batch once, every buffer and every gradient equal to a plain
    step's."""
    for a, b in zip(ran, plain):
        for m in a.modules():  # (instance norms count no batches)
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                assert int(m.num_batches_tracked) == 1
        for (name, u), (_, v) in zip(a.named_buffers(), b.named_buffers()):
            assert torch.equal(u, v), name
        for (name, u), (_, v) in zip(a.named_parameters(), b.named_parameters()):
            assert torch.equal(u.grad, v.grad), name


def test_a_plan_for_another_number_of_blocks_is_refused():
    blocks, x = _stack(n=3)
    for wrong in (plan.explicit(2, [0]), plan.explicit(4, [0, 2]),
                  plan.rotor(profile_blocks(blocks[:2], x))):
        with pytest.raises(ValueError, match="the plan is for .* blocks, got 3"):
            run_plan(blocks, wrong, x)
    with pytest.raises(TypeError, match="SegmentPlan or a NestedSchedule"):
        run_plan(blocks, [0, 2], x)


def test_a_norm_a_block_does_not_own_is_refused():
    """A block that runs a BatchNorm in training mode which is not its submodule
    (a plain function's, here) cannot have its statistics protected from a
    recomputation: refused with the reason, by run_plan and run_selective;
    the same norms in eval mode run."""
    torch.manual_seed(0)
    norms = [torch.nn.BatchNorm1d(8) for _ in range(3)]
    linears = [torch.nn.Linear(8, 8) for _ in range(3)]
    blocks = [lambda h, lin=lin, bn=bn: torch.tanh(bn(lin(h)))
              for lin, bn in zip(linears, norms)]
    x = torch.randn(6, 8, requires_grad=True)
    with pytest.raises(ValueError, match="run_plan: block 0 runs BatchNorm1d .* not one "
                                         "of its submodules"):
        run_plan(blocks, plan.explicit(3, [0, 1]), x)
    for bn in norms:
        bn.eval()
    run_plan(blocks, plan.explicit(3, [0, 1]), x).sum().backward()
    assert x.grad is not None



def _held_and_recomputed(blocks, x, p, loss=_loss):
    """(bytes saved-tensor hooks see held when the forward ends, FLOPs recomputed)
    of one step under ``p``."""
    params = torch.nn.ModuleList([b for b in blocks if isinstance(b, torch.nn.Module)])
    with SavedTensorMeter(params=params) as meter:
        out = loss(run_plan(blocks, p, x))
        held = meter.live_bytes
    out.backward()
    n = len(blocks)
    plain = forward_flops(lambda: loss(run_plan(blocks, plan.explicit(n, [0]), x)).backward())
    total = forward_flops(lambda: loss(run_plan(blocks, p, x)).backward())
    return held, total - plain


@pytest.mark.parametrize("case", ["tied-weight-in-loss", "input-without-grad"])
def test_a_tied_weight_and_a_prefix_without_gradient_are_predicted_exactly(case):
    """A loss that reads a block's weight (an output projection tied to it) does not
    save that weight as an activation (it was counted: 896 B predicted, 640
    measured); an input that needs no grad before a parameter-free block makes the
    first boundaries need none (their checkpoints hold and recompute nothing: 512 B
    and 512 FLOPs predicted, 384 B and 0 measured)."""
    torch.manual_seed(0)
    if case == "tied-weight-in-loss":
        blocks = [LinTanh() for _ in range(3)]
        weight = blocks[0].lin.weight

        def loss(y):
            return (y @ weight).square().mean()
        x = torch.randn(4, 8, requires_grad=True)
    else:
        blocks = [torch.nn.Tanh()] + [LinTanh() for _ in range(2)]
        loss = _loss
        x = torch.randn(4, 8)
    profile = profile_blocks(blocks, x, loss=loss)
    if case == "input-without-grad":
        assert profile.requires_grad == (False, False, True, True)
    for p in (plan.explicit(3, [0]), plan.explicit(3, [0, 1]), plan.explicit(3, [0, 1, 2]),
              plan.explicit(3, [0, 2]), plan.optimal_segments(profile)):
        assert _held_and_recomputed(blocks, x, p, loss) == (
            saved_after_forward(profile, p), plan.recompute_cost(profile, p)), p.starts


class _WritesBuffer(LinTanh):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, h):
        self.calls += 1
        return super().forward(h)


class _SharedConstant(LinTanh):
    table = None

    def forward(self, h):
        return super().forward(h) * self.table


@pytest.mark.parametrize("case, match", [
    ("identity", "block 1 returns a tensor in its input's storage"),
    ("detach", "block 1 does not pass the gradient back to its input"),
    ("writes-input", "block 1 writes its input in place"),
    ("writes-weight", r"block 1 writes a parameter in place \(lin.weight\)"),
    ("writes-buffer", r"block 1 writes a buffer in place \(calls\)"),
    ("shared-constant", "block 1 saves a tensor that block 0 saves too"),
    ("loss-saves-x", "the loss saves a tensor that is the stack's input x"),
    ("tuple", "block 1 returned tuple, not a tensor"),
])
def test_what_the_chain_model_cannot_describe_is_refused_by_name(case, match):
    """Each of these was planned with a silently wrong prediction (bytes counted
    twice, a recomputation that never runs, a weight halved by each rerun) or
    failed inside torch: the chain profile refuses it and says why; the model and
    the caller's input are left as they were."""
    torch.manual_seed(0)
    _SharedConstant.table = torch.rand(4, 8)
    middle = {"identity": torch.nn.Identity(), "detach": Detached(),
              "writes-input": WritesInput(), "writes-weight": WritesWeight(),
              "writes-buffer": _WritesBuffer(), "shared-constant": _SharedConstant(),
              "loss-saves-x": LinTanh(), "tuple": lambda h: (h, h)}[case]
    first = _SharedConstant() if case == "shared-constant" else LinTanh()
    blocks = [first, middle, LinTanh()]
    x = torch.randn(4, 8, requires_grad=True)
    loss = (lambda y: (y * x).mean()) if case == "loss-saves-x" else _loss
    weights = [b.lin.weight.clone() for b in blocks if isinstance(b, LinTanh)]
    kept = x.clone()
    with pytest.raises(ValueError, match=match):
        profile_blocks(blocks, x, loss=loss)
    assert torch.equal(x, kept)
    if case != "writes-weight":
        assert all(torch.equal(b.lin.weight, w) for b, w in
                   zip([b for b in blocks if isinstance(b, LinTanh)], weights))


def test_profiling_never_writes_the_callers_input():
    """A first block that writes its input in place, on an input that needs no grad,
    multiplied the caller's x by 4 while it was profiled; now it is refused first."""
    x = torch.ones(4, 8)
    with pytest.raises(ValueError, match="block 0 writes its input in place"):
        profile_blocks([lambda h: h.mul_(2), LinTanh()], x)
    assert torch.equal(x, torch.ones(4, 8))


def test_saved_after_forward_refuses_a_plan_it_cannot_price():
    blocks, x = _stack(n=3)
    profile = profile_blocks(blocks, x, loss=_loss)
    for wrong in (plan.explicit(6, [0, 3]), plan.explicit(2, [0, 1])):
        with pytest.raises(ValueError, match="the plan is for .* blocks, the profile has 3"):
            saved_after_forward(profile, wrong)
    for wrong in (plan.rotor(profile), [0, 1]):
        with pytest.raises(TypeError, match="plan must be a SegmentPlan"):
            saved_after_forward(profile, wrong)


def test_a_module_list_is_a_stack_of_blocks():
    from bookkit.torchplan import (measure_step, run_selective, selective_policy,
                                   trace_torch_graph)
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([LinTanh() for _ in range(3)])
    x = torch.randn(4, 8, requires_grad=True)
    profile = profile_blocks(blocks, x, loss=_loss)
    assert profile.n == 3
    run_plan(blocks, plan.explicit(3, [0, 2]), x)
    g = trace_torch_graph(blocks, x, loss=_loss)
    policy = selective_policy(g, plan.store_all(g))
    m = measure_step(blocks, x, _loss, run=lambda h: run_selective(blocks, policy, h))
    assert g.n_regions == 3 and m.held_bytes == policy.held_bytes
