"""Times as a person reads them: the clock of the host that ran the campaign, with its offset from UTC.

A report is rendered anywhere, years later; its times are those of the campaign's host (its offset
recorded with the campaign, results/provenance.py), so they read as that host's logs do and every
render of one campaign says the same. A campaign recorded before the offset was reads in UTC.
"""

from __future__ import annotations

import datetime as dt

from bench_plugin.results.summary import Summary


def clock(epoch_s: float, utc_offset_s: int | None = None, date: bool = True, seconds: bool = True) -> str:
    """``2026-12-03 07:20:01 +01:00`` (without ``date``: ``07:20:01 +01:00``; without ``seconds``:
    ``2026-12-03 07:20 +01:00``) at ``utc_offset_s`` seconds east of UTC; None: this host's local time zone."""
    zone = None if utc_offset_s is None else dt.timezone(dt.timedelta(seconds=utc_offset_s))
    local = dt.datetime.fromtimestamp(epoch_s, tz=zone) if zone else dt.datetime.fromtimestamp(epoch_s).astimezone()
    offset = local.strftime("%z")
    return (f"{local:%Y-%m-%d %H:%M:%S}"[0 if date else 11:None if seconds else -3]
            + f" {offset[:3]}:{offset[3:]}")


def utc_offset(summary: Summary) -> int:
    """The campaign host's offset from UTC in seconds (0, UTC, where it was not recorded)."""
    recorded = summary.conditions.utc_offset_s if summary.conditions else None
    return recorded if recorded is not None else 0


def campaign_clock(summary: Summary, epoch_s: float, date: bool = True, seconds: bool = True) -> str:
    """``epoch_s`` on the clock of the host that ran ``summary``'s campaign."""
    return clock(epoch_s, utc_offset(summary), date, seconds)
