"""The least GPUs that hold a traffic, by brute force: the truth `bench-plugin plan` is checked against.

Independent of analysis/packing.py's nested groups: every subset of the classes a GPU may carry (its limit
its strictest class's), every count of GPUs of each, in order of the total, until one holds the work of
every class (Hall's condition over every set of classes: their work fits on the GPUs that may carry one).
"""

from __future__ import annotations

import itertools

CLASSES = ("llm", "embedding", "asr")
SUBSETS = [frozenset(s) for k in (1, 2, 3) for s in itertools.combinations(CLASSES, k)]


def fewest_gpus(work: dict[str, float], limits: dict[str, float], headroom: float, *, alone: bool = False) -> int:
    """The least GPUs for each class's ``work`` (busy fraction) with per-class busy ``limits`` (each GPU loaded to
    its limit / (1 + headroom)); ``alone``: each GPU carries one class (an exclusive arm)."""
    subsets = [s for s in SUBSETS if len(s) == 1] if alone else SUBSETS
    caps = {s: min(limits[c] for c in s) / (1 + headroom) for s in subsets}
    needed = [c for c in CLASSES if work.get(c, 0) > 0]
    for total in range(0, 200):
        for split in itertools.combinations(range(total + len(subsets) - 1), len(subsets) - 1):
            counts = [b - a - 1 for a, b in zip((-1, *split), (*split, total + len(subsets) - 1), strict=True)]
            if all(sum(work[c] for c in group) <= 1e-9 + sum(n * caps[s] for n, s in zip(counts, subsets, strict=True)
                                                           if s & set(group))
                   for k in range(1, len(needed) + 1) for group in itertools.combinations(needed, k)):
                return total
    raise AssertionError("no plan under 200 GPUs")


Row = tuple[str, dict[str, float], float]
"""A criterion: (its class, its weight per req/s of each class, its limit U)."""


def fewest_gpus_lp(traffic: dict[str, float], rows: list[Row], headroom: float, most: int = 8) -> int:
    """The least GPUs for ``traffic`` when each GPU carrying the classes S holds x while w_j · x <= U_j for every
    criterion j of S (any rows, not one busy fraction), by brute force: every count of GPUs per subset, in order
    of the total, each checked by a linear program (scipy's linprog) for a split of the traffic that fits."""
    from scipy.optimize import linprog

    needed = [c for c in CLASSES if traffic.get(c, 0) > 0]
    subsets = [s for s in SUBSETS if s <= set(needed)]
    pairs = [(s, c) for s in subsets for c in sorted(s)]
    for total in range(0, most + 1):
        for split in itertools.combinations(range(total + len(subsets) - 1), len(subsets) - 1):
            counts = [b - a - 1 for a, b in zip((-1, *split), (*split, total + len(subsets) - 1), strict=True)]
            upper, bound = [], []
            for n, s in zip(counts, subsets, strict=True):
                for cls, weights, limit in rows:
                    if cls in s:
                        upper.append([weights.get(c, 0.0) if t == s else 0.0 for t, c in pairs])
                        bound.append(limit * n)
            equal = [[1.0 if c == cls else 0.0 for _, c in pairs] for cls in needed]
            found = linprog([0.0] * len(pairs), A_ub=upper or None, b_ub=bound or None, A_eq=equal,
                            b_eq=[(1 + headroom) * traffic[c] for c in needed], bounds=(0, None), method="highs")
            if found.status == 0:
                return total
    raise AssertionError(f"no plan under {most} GPUs")
