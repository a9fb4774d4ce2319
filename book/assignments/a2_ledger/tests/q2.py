from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 2

@test_case(points=1, hidden=False)
def test_measure_the_notebook_model(measure_saved_per_layer, model, INPUT_SHAPE):
    import numpy as np
    from minigrad import Tensor
    x = Tensor(np.zeros(INPUT_SHAPE, dtype=np.float32))
    got = measure_saved_per_layer(list(model), x)
    assert isinstance(got, list) and len(got) == len(model), f'expected one number per layer, got {got!r}'
    assert got[0] == 8192 and got[1] == 32768, f'the first two layers add 8192 and 32768 bytes; measured {got[:2]}'

