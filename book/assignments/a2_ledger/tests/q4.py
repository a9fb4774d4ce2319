from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 3

@test_case(points=1, hidden=False)
def test_crossover_of_the_notebook_model(crossover_batch, predict_step, model):
    b = crossover_batch(list(model), 64)
    assert isinstance(b, int) and b >= 1, f'crossover_batch must return a positive int, got {b!r}'
    at, below = (predict_step(list(model), (b, 64)), predict_step(list(model), (b - 1, 64)) if b > 1 else None)
    fixed = at['parameters'] + at['gradients'] + at['optimizer']
    assert at['activations'] >= fixed, f"at batch {b} the activations ({at['activations']}) are still below {fixed}"
    assert below is None or below['activations'] < fixed, f'batch {b - 1} already reaches {fixed}: {b} is not the smallest'

