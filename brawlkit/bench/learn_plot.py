"""What a recipe's bot wins against env steps spent: ``bench learn`` records side by side.

``python -m brawlkit.bench.learn_plot chosen chosen_wide_1m chosen_wide --out PNG`` reads each
recipe's kept records (``docs/data/bench_learn/<recipe>/s<seed>/{train,eval,start_eval}.json``,
or ``--records DIR``) and draws, per opponent, the pooled win rate of the shipped
(deterministic) policy on fresh matches with its 95 % Wilson interval at each recipe's
budget of env steps, the clone the recipes start from at the left edge.  Why a plot: the
wide settings trade gradient steps per sample for samples per second, and whether that
trade pays shows only when equal-step and equal-time points stand side by side.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from brawlkit.common.paths import repo_root
from brawlkit.common.stats import wilson_interval

#: the opponents drawn: where the recipes differ (every recipe beats cpu:1-4)
OPPONENTS = ("cpu:5", "cpu:6", "cpu:7", "cpu:8", "baseline")


def pooled(recipe_dir: Path, kind: str = "eval") -> dict[str, Any]:
    """Env steps (mean over seeds) and, per opponent, (wins, matches) pooled over the seeds
    of one recipe's records (``kind`` ``start_eval``: the clone it started from, 0 steps)."""
    seeds = sorted(d for d in recipe_dir.iterdir() if (d / f"{kind}.json").is_file())
    if not seeds:
        raise FileNotFoundError(f"no {kind}.json under {recipe_dir}/s*")
    counts: dict[str, list[int]] = {}
    steps = []
    for d in seeds:
        ev = json.loads((d / f"{kind}.json").read_text())["eval"]
        for opp, r in ev.items():
            c = counts.setdefault(opp, [0, 0])
            c[0] += int(r["wins"])
            c[1] += int(r["episodes"])
        steps.append(0 if kind == "start_eval" else
                     int(json.loads((d / "train.json").read_text())["env_steps"]))
    return {"steps": sum(steps) / len(steps), "seeds": len(seeds),
            "counts": {k: tuple(v) for k, v in counts.items()}}


def plot(recipes: list[str], out: Path, records: Path) -> Path:
    """One panel per opponent; one marker series per recipe, the clone as a dashed level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(OPPONENTS), figsize=(3.2 * len(OPPONENTS), 3.2), sharey=True)
    clone = pooled(records / recipes[0], "start_eval")
    for ax, opp in zip(axes, OPPONENTS, strict=True):
        if opp in clone["counts"]:
            w, n = clone["counts"][opp]
            ax.axhline(w / n, color="tab:gray", ls="--", lw=1, label="the clone (0 steps)")
        for k, name in enumerate(recipes):
            p = pooled(records / name)
            if opp not in p["counts"]:
                continue
            w, n = p["counts"][opp]
            lo, hi = wilson_interval(w, n)
            rate = w / n
            ax.errorbar([p["steps"] / 1e6 + 0.18 * (k - (len(recipes) - 1) / 2)], [rate], yerr=[[max(0.0, rate - lo)], [max(0.0, hi - rate)]], fmt="os^D"[k % 4],
                        ms=7, capsize=3, label=f"{name} ({p['seeds']} seed{'s' * (p['seeds'] > 1)})")
        ax.set_title(f"vs {opp}")
        ax.set_xlim(-0.3, max(9.0, max(pooled(records / r)["steps"] for r in recipes) / 1e6 + 1))
        ax.set_xticks([0, 1, 2, 4, 8])
        ax.set_xlabel("env steps of RL (M; points nudged apart)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("win rate, 100 fresh matches / seed")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("the shipped policy's win rate against env steps spent (95 % intervals)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brawlkit.bench.learn_plot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipes", nargs="+", help="recipe names with records (the first's clone is drawn)")
    ap.add_argument("--records", default=str(repo_root() / "docs" / "data" / "bench_learn"),
                    help="where the records are (default docs/data/bench_learn)")
    ap.add_argument("--out", default="learning_budget.png", help="the PNG to write")
    args = ap.parse_args(argv)
    try:
        print(plot(args.recipes, Path(args.out), Path(args.records)))
    except FileNotFoundError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
