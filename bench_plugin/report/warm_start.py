"""Where a campaign's searches started from (``--warm-start-from``), said in one line by every rendering."""

from __future__ import annotations

from bench_plugin.results.summary import Summary


def warm_start_line(summary: Summary) -> str | None:
    """Where the searches started from (``--warm-start-from``), in one line; None where they started cold."""
    warm = summary.warm_start_from
    if warm is None:
        return None
    arms = sorted({b.arm for b in warm.brackets})
    return (f"searches started from campaign {warm.campaign} (`{warm.directory}`): the brackets it left "
            f"{len(warm.brackets)} rays in, in the first repeat of {', '.join(arms)}; every boundary rests on this "
            "campaign's own probes")
