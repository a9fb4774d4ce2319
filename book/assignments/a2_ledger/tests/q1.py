from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 5

@test_case(points=1, hidden=False)
def test_prediction_for_the_notebook_model(predict_saved_per_layer, model, INPUT_SHAPE):
    from minigrad.testing import assert_answer
    got = predict_saved_per_layer(list(model), INPUT_SHAPE)
    got = list(got) if isinstance(got, (list, tuple)) else got
    assert_answer('length', len(got) if isinstance(got, list) else None, len(model), msg="the notebook's model: the number of predictions (one per layer)")
    assert_answer('first_two', got[:2] if isinstance(got, list) else None, [32 * 64 * 4, 32 * 256 * 4], msg="the notebook's model: the first Linear keeps x (8192 bytes), the ReLU its output (32768)")

