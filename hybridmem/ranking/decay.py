"""Temporal decay: older memories count less, with an exponential half-life.

``factor = exp(-ln 2 / half_life_days * age_days)`` with ``age_days = max(0, (now - timestamp) / 86400)``, the
reference system's formula (plain exponential forgetting). It is computed as ``0.5 ** (age_days / half_life_days)``,
the same function, but exactly 0.5 at one half-life. Evergreen chunks (``MEMORY.md``, undated topic files) are never
decayed; nor are chunks "from the future" (age clamps to 0).

Example:
    >>> decay_factor(timestamp=0.0, now=30 * 86400.0, half_life_days=30.0)
    0.5
    >>> decay_factor(timestamp=0.0, now=30 * 86400.0, half_life_days=30.0, evergreen=True)
    1.0
"""

from __future__ import annotations

__all__ = ["SECONDS_PER_DAY", "age_days", "decay_factor"]

SECONDS_PER_DAY = 86400.0


def age_days(timestamp: float, now: float) -> float:
    """Age in days at ``now`` (both epoch seconds), never negative.

    Example:
        >>> age_days(0.0, 172800.0)
        2.0
    """
    age = (now - timestamp) / SECONDS_PER_DAY
    return age if age > 0.0 else 0.0


def decay_factor(timestamp: float, now: float, half_life_days: float, evergreen: bool = False) -> float:
    """The multiplier in (0, 1] for a chunk dated ``timestamp`` (epoch seconds) at time ``now``.

    Args:
        timestamp: the chunk's date (its file's date, else mtime), epoch seconds.
        now: the reference time, epoch seconds.
        half_life_days: age at which the factor is 0.5 (> 0).
        evergreen: when True the factor is 1.

    Returns:
        ``0.5 ** (age_days / half_life_days)``; 1.0 for evergreen chunks and for ages <= 0.

    Example:
        >>> decay_factor(0.0, 60 * 86400.0, 30.0)
        0.25
    """
    if evergreen:
        return 1.0
    age = (now - timestamp) / SECONDS_PER_DAY
    if age <= 0.0:
        return 1.0
    return 0.5 ** (age / half_life_days)
