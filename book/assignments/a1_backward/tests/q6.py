from otter.test_files import test_case

OK_FORMAT = False

name = "q6"
points = 4

@test_case(points=1, hidden=False)
def test_prediction_table_is_complete(PREDICTED_SAVED_BYTES):
    expected_keys = {'F.mul(x, y)', 'F.tanh(x)', 'F.matmul(x, w)', 'F.relu(x)', 'F.sum(x)', 'F.softmax(x)', 'F.mse_loss(x, target)', 'F.layer_norm(x, 128)'}
    assert isinstance(PREDICTED_SAVED_BYTES, dict), 'PREDICTED_SAVED_BYTES must be a dict'
    missing = expected_keys - set(PREDICTED_SAVED_BYTES)
    assert not missing, f'PREDICTED_SAVED_BYTES lacks the entries {sorted(missing)}'
    not_int = [k for k in expected_keys if not isinstance(PREDICTED_SAVED_BYTES[k], int)]
    assert not not_int, f'these entries are not ints: {not_int}'

