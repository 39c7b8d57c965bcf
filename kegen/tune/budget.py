"""One evaluation budget shared across the tuning problems by expected gain."""

from __future__ import annotations


def expected_gain(seconds: float, hot_share: float, roofline_fraction: float) -> float:
    """Time the problem could still win: its time x its hot share x its distance to the roofline."""
    distance = max(0.0, 1.0 - min(1.0, max(0.0, roofline_fraction)))
    return max(0.0, seconds) * max(0.0, hot_share) * distance


def allocate(budget: int, gains: dict[str, float], minimum: int = 1) -> dict[str, int]:
    """Split `budget` evaluations over problems in proportion to their expected gains (largest
    remainder); each problem with a gain gets at least `minimum` while the budget lasts."""
    if budget < 0:
        raise ValueError(f"budget must be >= 0 (got {budget})")
    names = sorted((n for n, g in gains.items() if g > 0), key=lambda n: -gains[n])
    out = dict.fromkeys(gains, 0)
    if not names or budget == 0:
        return out
    floor = min(minimum, budget // len(names))
    for n in names:
        out[n] = floor
    left = budget - floor * len(names)
    total = sum(gains[n] for n in names)
    exact = {n: left * gains[n] / total for n in names}
    for n in names:
        out[n] += int(exact[n])
    rest = left - sum(int(exact[n]) for n in names)
    for n in sorted(names, key=lambda n: -(exact[n] - int(exact[n])))[:rest]:
        out[n] += 1
    return out
