from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 6

@test_case(points=1, hidden=False)
def test_policy_meets_the_budgets(my_policy, block, x, with_policy, held_for_backward, recomputed_matmul_flops, PLAIN_HELD, FORWARD_MATMUL_FLOPS):
    import torch
    params = list(block.parameters())
    run = with_policy(block, my_policy)
    try:
        held = held_for_backward(run, x, params)
        flops = recomputed_matmul_flops(run, block, x)
    except Exception as e:
        raise AssertionError(f'the block checkpointed with my_policy failed: {type(e).__name__}: {e}') from None
    assert held <= 0.45 * PLAIN_HELD, f'with your policy the block holds {held} bytes, more than 45 % of {PLAIN_HELD}'
    assert flops <= 0.3 * FORWARD_MATMUL_FLOPS, f"your policy recomputes {flops} FLOPs of matrix products, more than 30 % of the forward's {FORWARD_MATMUL_FLOPS}"

@test_case(points=1, hidden=False)
def test_policy_gives_the_same_gradients(my_policy, block, x, with_policy):
    import torch
    block.zero_grad()
    x.grad = None
    block(x).sum().backward()
    plain = [x.grad.clone()] + [p.grad.clone() for p in block.parameters()]
    block.zero_grad()
    x.grad = None
    with_policy(block, my_policy)(x).sum().backward()
    mine = [x.grad.clone()] + [p.grad.clone() for p in block.parameters()]
    assert all((torch.allclose(a, b, rtol=0, atol=1e-06) for a, b in zip(plain, mine))), "the gradients with your policy differ from the plain block's"

