from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 6

@test_case(points=1, hidden=False)
def test_policy_meets_the_budgets(my_policy, Block, with_policy, held_for_backward, recomputed_matmul_flops, OpMeter):
    import torch
    from minigrad.testing import assert_answer
    torch.manual_seed(0)
    block = Block(64, 4)
    x = torch.randn(2, 128, 64, requires_grad=True)
    params = list(block.parameters())
    plain_held = held_for_backward(block, x, params)
    with OpMeter() as forward:
        block(x)
    run = with_policy(block, my_policy)
    held = held_for_backward(run, x, params)
    flops = recomputed_matmul_flops(run, block, x)
    assert_answer('held_within_45', held <= 0.45 * plain_held, True, msg=f'the block of this notebook checkpointed with my_policy: at most 45 % of the {plain_held} bytes the plain block holds')
    assert_answer('recompute_within_30', flops <= 0.3 * forward.matmul_flops, True, msg=f"the same: recomputed matrix-product FLOPs at most 30 % of the forward's {forward.matmul_flops}")

@test_case(points=1, hidden=False)
def test_policy_gives_the_same_gradients(my_policy, Block, with_policy):
    import torch
    from minigrad.testing import assert_answer
    torch.manual_seed(0)
    block = Block(64, 4)
    x = torch.randn(2, 128, 64, requires_grad=True)
    block.zero_grad()
    x.grad = None
    block(x).sum().backward()
    plain = [x.grad.detach().numpy().copy()] + [p.grad.detach().numpy().copy() for p in block.parameters()]
    block.zero_grad()
    x.grad = None
    with_policy(block, my_policy)(x).sum().backward()
    mine = [x.grad.detach().numpy().copy()] + [p.grad.detach().numpy().copy() for p in block.parameters()]
    assert_answer('grads', mine, plain, compare='close', atol=1e-06, msg="the block of this notebook checkpointed with my_policy: the gradients of x and of every parameter (the plain block's)")

