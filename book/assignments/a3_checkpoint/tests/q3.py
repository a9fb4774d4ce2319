from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 5

@test_case(points=1, hidden=False)
def test_peak_without_checkpoints(predicted_peak):
    for n in (1, 4, 9):
        got = predicted_peak(n, [0], 100)
        assert got == (n + 1) * 100, f'with starts [0] nothing is checkpointed: {n + 1} activations of 100 bytes, you predicted {got!r}'

