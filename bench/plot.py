#!/usr/bin/python3
"""plot.py RESULTS_CSV OUT_DIR: one PNG per benchmark family (the name's first '/'-separated part),
bars of each result's ratio to its same-run baseline."""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
families = defaultdict(list)
for r in rows:
    families[r["name"].split("/")[0]].append(r)
for family, rs in families.items():
    rs = [r for r in rs if r["ratio"] not in ("", "nan")]
    if not rs:
        continue
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rs) + 1.2))
    names = [r["name"] for r in rs]
    ratios = [float(r["ratio"]) for r in rs]
    ax.barh(names, ratios, color="#4878a8")
    ax.axvline(1.0, color="#aa3333", linewidth=1)
    for i, r in enumerate(rs):
        ax.text(ratios[i], i, f" {float(r['value']):.4g} {r['unit']} (vs {r['baseline']})", va="center", fontsize=7)
    ax.set_xlabel("ratio to same-run baseline")
    ax.set_title(family)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(os.path.join(sys.argv[2], f"{family}.png"), dpi=110)
    plt.close(fig)
