from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 5

@test_case(points=1, hidden=False)
def test_peak_without_checkpoints(predicted_peak):
    from minigrad.testing import assert_answer
    for n in (1, 4, 9):
        assert_answer(f'plain[{n}]', predicted_peak(n, [0], 100), (n + 1) * 100, msg=f'{n} blocks, starts [0] (nothing checkpointed), 100-byte activations: the predicted peak')
    for starts in ([0, 3], [0, 2, 4]):
        assert_answer(f'six{starts}', predicted_peak(6, starts, 100), 500, msg=f'starts {starts} on 6 blocks, 100-byte activations (the ledger cell above measures 5 activations): the predicted peak')

