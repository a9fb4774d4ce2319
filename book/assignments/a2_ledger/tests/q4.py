from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 3

@test_case(points=1, hidden=False)
def test_crossover_of_the_notebook_model(crossover_batch, predict_step, model):
    import math
    from minigrad.testing import assert_answer
    one = predict_step(list(model), (1, 64))
    fixed = one['parameters'] + one['gradients'] + one['optimizer']
    assert_answer('batch', crossover_batch(list(model), 64), max(1, math.ceil(fixed / one['activations'])), msg="the notebook's model: the smallest batch whose activations reach the fixed bytes")

