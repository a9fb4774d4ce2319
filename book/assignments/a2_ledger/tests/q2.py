from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 2

@test_case(points=1, hidden=False)
def test_measure_the_notebook_model(measure_saved_per_layer, model, INPUT_SHAPE):
    import numpy as np
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    x = Tensor(np.zeros(INPUT_SHAPE, dtype=np.float32))
    got = measure_saved_per_layer(list(model), x)
    assert_answer('length', len(got) if isinstance(got, list) else None, len(model), msg="the notebook's model: the number of measurements (one per layer)")
    assert_answer('first_two', got[:2] if isinstance(got, list) else None, [8192, 32768], msg="the notebook's model: the bytes the first two layers add")

