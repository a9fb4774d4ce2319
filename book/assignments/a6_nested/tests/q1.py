from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 7

@test_case(points=1, hidden=False)
def test_nested_matches_the_plain_run(run_nested, make_blocks, run_plain, gradients):
    import minigrad
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    widths, batch = ([8, 12, 8, 12, 8], 3)
    layers = make_blocks(widths)
    x = Tensor(minigrad.random.randn(batch, 8), requires_grad=True)
    plain, _ = gradients(layers, x, run_plain)
    items = [('ckpt', 0, 3, [('ckpt', 0, 2, [('taped', 0), ('taped', 1)]), ('taped', 2)]), ('taped', 3)]
    got, m = gradients(layers, x, lambda ls, h: run_nested(ls, items, h))
    assert_answer('grads', got, plain, msg=f"widths {widths}, schedule {items}: the gradients (bit for bit the plain run's)")
    a = [4 * batch * w for w in widths]
    assert_answer('peak', m.peak_increase['activations'], a[0] + a[3] + a[4], msg=f"widths {widths}, batch {batch}, schedule {items}: the ledger's peak of saved activations (bytes)")

