from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 4

@test_case(points=1, hidden=False)
def test_meter_counts_tanh(SavedTensorMeter):
    import torch
    x = torch.randn(8, 16, requires_grad=True)
    with SavedTensorMeter() as meter:
        y = torch.tanh(x)
    assert meter.saved_bytes == 8 * 16 * 4, f'tanh saves its (8, 16) float32 output, 512 bytes; the meter says {meter.saved_bytes}'
    assert meter.n_saved == 1, f'tanh saves one tensor; the meter counted {meter.n_saved}'

