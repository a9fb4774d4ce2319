from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 4

@test_case(points=1, hidden=False)
def test_predict_step_parameters_of_the_notebook_model(predict_step, model, INPUT_SHAPE):
    got = predict_step(list(model), INPUT_SHAPE)
    assert isinstance(got, dict), f'predict_step must return a dict, got {got!r}'
    params = sum((p.nbytes for p in model.parameters()))
    assert got.get('parameters') == params, f"the parameters take {params} bytes; predicted {got.get('parameters')!r}"
    assert got.get('optimizer') == 2 * params, f"AdamW keeps two arrays per parameter, {2 * params} bytes; predicted {got.get('optimizer')!r}"

