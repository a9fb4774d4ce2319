from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 5

@test_case(points=1, hidden=False)
def test_prediction_for_the_notebook_model(predict_saved_per_layer, model, INPUT_SHAPE):
    got = predict_saved_per_layer(list(model), INPUT_SHAPE)
    assert isinstance(got, list) and len(got) == len(model), f'expected a list of {len(model)} ints, one per layer, got {got!r}'
    assert got[0] == 32 * 64 * 4, f'the first Linear keeps the input x, 32 * 64 * 4 = 8192 bytes; you predicted {got[0]!r}'
    assert got[1] == 32 * 256 * 4, f'the ReLU keeps its output, 32768 bytes; you predicted {got[1]!r}'

