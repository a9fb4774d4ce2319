from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 5

@test_case(points=1, hidden=False)
def test_peak_without_checkpoints(predicted_peak):
    for n in (1, 4, 9):
        got = predicted_peak(n, [0], 100)
        assert got == (n + 1) * 100, f'with starts [0] nothing is checkpointed: {n + 1} activations of 100 bytes, you predicted {got!r}'
    for starts in ([0, 3], [0, 2, 4]):
        got = predicted_peak(6, starts, 100)
        assert got == 500, f'starts {starts} on 6 blocks: the ledger measures a peak of 5 activations (the cell above prints it), you predicted {got!r} bytes for 100-byte activations'

