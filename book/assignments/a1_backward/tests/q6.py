from otter.test_files import test_case

OK_FORMAT = False

name = "q6"
points = 4

@test_case(points=1, hidden=False)
def test_prediction_table_is_complete(PREDICTED_SAVED_BYTES):
    from minigrad.testing import assert_answer
    expected_keys = ['F.mul(x, y)', 'F.tanh(x)', 'F.matmul(x, w)', 'F.relu(x)', 'F.sum(x)', 'F.softmax(x)', 'F.mse_loss(x, target)', 'F.layer_norm(x, 128)']
    table = PREDICTED_SAVED_BYTES if isinstance(PREDICTED_SAVED_BYTES, dict) else {}
    assert_answer('keys', sorted((k for k in table if k in expected_keys)), sorted(expected_keys), msg='the entries of PREDICTED_SAVED_BYTES (a dict)')
    assert_answer('ints', [type(table.get(k)).__name__ for k in expected_keys], ['int'] * len(expected_keys), msg='the types of its entries (ints)')

