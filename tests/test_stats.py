from workbench.stats import mean, rate


def test_rate_and_mean_count_only_what_applies():
    assert rate([True, False, None, 1]) == 2 / 3  # None does not apply: left out, not counted as false
    assert mean([1, None, 2]) == 1.5
    assert rate([]) is None and rate([None]) is None  # no figure, not 0
    assert mean(iter([])) is None
