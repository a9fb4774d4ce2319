from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 4

@test_case(points=1, hidden=False)
def test_meter_counts_tanh(SavedTensorMeter):
    import torch
    from minigrad.testing import assert_answer
    x = torch.randn(8, 16, requires_grad=True)
    with SavedTensorMeter() as meter:
        y = torch.tanh(x)
    assert_answer('saved_bytes', meter.saved_bytes, 8 * 16 * 4, msg='tanh of an (8, 16) float32 tensor (it saves its output): meter.saved_bytes')
    assert_answer('n_saved', meter.n_saved, 1, msg='tanh of an (8, 16) tensor (one tensor saved): meter.n_saved')

