"""Link rates as users type them ("100mbit", "1gbit", "2.5gbit") and as tc wants them (bits per second)."""

from __future__ import annotations

import re

_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
MIN_BURST_BYTES = 256 * 1024


class RateError(ValueError):
    """A link rate string the harness cannot use."""


def parse_rate(text: str) -> int:
    """Bits per second of a rate like "100mbit", "1gbit" or "2.5gbit" (tc's bit units, decimal prefixes)."""
    if not isinstance(text, str):
        raise RateError(f"bandwidth must be a string like '100mbit' or '1gbit', got {text!r}")
    match = _RATE.match(text.lower())
    if not match:
        raise RateError(f"bandwidth {text!r} is not a rate: write a number and a unit, e.g. '100mbit' or '1gbit'")
    number, unit = match.groups()
    if unit not in _UNITS:
        hint = " (tc's 'bps' units mean bytes per second; write bits, e.g. '800mbit')" if "bps" in unit else ""
        raise RateError(f"bandwidth {text!r}: unknown unit {unit!r}; use one of {', '.join(_UNITS)}{hint}")
    bits = round(float(number) * _UNITS[unit])
    if bits < 8 * 1000:
        raise RateError(f"bandwidth {text!r} is too low to emulate (the minimum is 8kbit)")
    return bits


def tbf_burst_bytes(bits_per_s: int) -> int:
    """A tbf bucket of 2 ms of traffic, at least 256 KiB.

    Measured at 100mbit, MTU 1500: a 64 KiB bucket gave 81-94% of the rate for 16 MiB Send/Recv, 256 KiB
    gave 95-97% (the TCP ceiling is 95.6%). A bucket lets a transfer beat the rate by its size once, so
    measure throughput with messages much larger than it (>= 16 MiB: at most 1.6%).
    """
    return max(MIN_BURST_BYTES, bits_per_s // 8 // 500)
