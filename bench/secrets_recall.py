"""The secret scanner's recall (X2) measured on many samples: for each format in
secret_samples.py, N fresh random samples under each of a few seeds, and how many the
scanner misses, with examples. A miss rate of 1% in a format is a hole a random
credential falls through; secrets_fp.py draws too few samples to see it. Prints a table,
writes JSON."""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import common
import secret_samples
from memdir.secret_scan import find

NAME = "secrets_recall"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=2000, help="samples per format and seed")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    parser.add_argument("--examples", type=int, default=3, help="missed samples kept per format")
    parser.add_argument("--out-dir", default=common.RESULTS_DIR)
    parser.add_argument("--cache-dir", help="unused")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]

    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    names = list(secret_samples.formats(random.Random(0)))
    for name in names:
        missed: list[str] = []
        drawn = 0
        for seed in seeds:
            # a generator per format and seed, as the test draws: one format's misses do
            # not depend on how many samples the formats before it took
            make = secret_samples.formats(random.Random(f"{seed} {name}"))[name]
            for _ in range(args.samples):
                text = make()
                drawn += 1
                if find(text) is None:
                    missed.append(text)
        rows.append(
            {
                "format": name,
                "samples": drawn,
                "missed": len(missed),
                "rate": len(missed) / drawn if drawn else 0.0,
                "examples": missed[: args.examples],
            }
        )
    seconds = time.perf_counter() - start

    common.print_table(
        "secret scanner: misses per format (fresh random samples)",
        [
            ("format", "format", ""),
            ("samples", "samples", ",d"),
            ("missed", "missed", ",d"),
            ("rate", "rate", ".4f"),
        ],
        rows,
    )
    for row in rows:
        for example in row["examples"]:
            print(f"  missed {row['format']}: {example[:100]!r}")
    total = sum(r["samples"] for r in rows)
    missed_total = sum(r["missed"] for r in rows)
    summary = {
        "formats": len(rows),
        "formats_with_misses": sum(1 for r in rows if r["missed"]),
        "samples": total,
        "missed": missed_total,
        "miss_rate": missed_total / total if total else 0.0,
        "us_per_sample": 1e6 * seconds / max(1, total),
    }
    print(
        f"{missed_total:,} of {total:,} samples missed in {summary['formats_with_misses']} of "
        f"{len(rows)} formats ({summary['us_per_sample']:.0f} µs a sample)"
    )
    common.write_result(
        NAME, args.out_dir, {"samples": args.samples, "seeds": seeds}, rows, summary
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
