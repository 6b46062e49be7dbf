"""Whether a pack's calibrated thresholds were chosen on the engine that now scores it.

A `[calibration]` block records the `system_fingerprint` of the engine whose scores chose its thresholds. Another
fingerprint (another model, precision, device or spinfc version) gives other scores, so the thresholds may not
mean what they meant: `spinfc serve`, `spinfc score` and `spinfc calibrate` warn, naming the pack and both.
"""

from __future__ import annotations

from collections.abc import Iterable

from spinfc.frontend import Pack


def stale_calibrations(packs: Iterable[Pack], fingerprint: str) -> list[str]:
    """One warning per pack calibrated under another fingerprint than `fingerprint`; [] when none."""
    return [f"pack {pack.id!r}: its thresholds were calibrated on another engine ({pack.calibration.model}, "
            f"{pack.calibration.system_fingerprint}, {pack.calibration.date}) than this one ({fingerprint}); "
            "scores may differ, so check them or run spinfc calibrate again (docs/calibration.md)"
            for pack in packs
            if pack.calibration is not None and fingerprint and pack.calibration.system_fingerprint != fingerprint]
