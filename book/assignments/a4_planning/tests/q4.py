from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 3

@test_case(points=1, hidden=False)
def test_chain_profile_shapes(chain_profile):
    a, m, c = chain_profile([4, 8, 2], 3)
    assert list(a) == [48, 96, 24], f'a for widths [4, 8, 2] and batch 3 is [48, 96, 24] bytes, got {a!r}'
    assert list(m) == [96, 24] and list(c) == [192, 96], f'expected m = [96, 24] and c = [192, 96], got {m!r}, {c!r}'

