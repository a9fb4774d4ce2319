from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 4

@test_case(points=1, hidden=False)
def test_predict_step_parameters_of_the_notebook_model(predict_step, model, INPUT_SHAPE):
    from minigrad.testing import assert_answer
    got = predict_step(list(model), INPUT_SHAPE)
    got = got if isinstance(got, dict) else {}
    params = sum((p.nbytes for p in model.parameters()))
    assert_answer('parameters', got.get('parameters'), params, msg="the notebook's model: predicted bytes of the parameters")
    assert_answer('optimizer', got.get('optimizer'), 2 * params, msg="the notebook's model: predicted bytes of AdamW's state (two arrays per parameter)")

