"""The secret scanner (X2) measured: synthetic secrets caught per format (secret_samples.py:
several fresh samples of each), evasions caught per kind (each hiding secrets of several
formats), false positives on clean text (LoCoMo conversation turns, Python standard library
source lines, and clean texts with the tricky words), its cost per text and its import
time (a fresh interpreter). Prints tables, writes JSON."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import sysconfig
import time
from typing import Any

import common
import secret_samples
from memdir.secret_scan import find

NAME = "secrets_fp"


def corpus(locomo: str | None, max_code_lines: int, max_package_lines: int) -> dict[str, list[str]]:
    packages = "code and docs (installed packages' lines)"
    texts: dict[str, list[str]] = {
        "prose (LoCoMo turns)": [],
        "code (stdlib lines)": [],
        packages: [],
    }
    if locomo and os.path.exists(locomo):
        with open(locomo, encoding="utf-8") as handle:
            for conversation in json.load(handle):
                for key, turns in conversation["conversation"].items():
                    if key.startswith("session_") and isinstance(turns, list):
                        texts["prose (LoCoMo turns)"] += [t["text"] for t in turns]
    stdlib = sysconfig.get_paths()["stdlib"]
    for folder, _, names in sorted(os.walk(stdlib)):
        if "test" in folder or "site-packages" in folder:
            continue
        for name in sorted(names):
            if name.endswith(".py") and len(texts["code (stdlib lines)"]) < max_code_lines:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    texts["code (stdlib lines)"] += [line for line in f if line.strip()]
    # other people's code, docs, configs and lockfile-like JSON: site-packages, memdir aside
    site = sysconfig.get_paths()["purelib"]
    kinds = (".py", ".md", ".txt", ".json", ".toml", ".cfg", ".rst")
    for folder, _, names in sorted(os.walk(site)):
        if "memdir" in folder:
            continue
        for name in sorted(names):
            if name.endswith(kinds) and len(texts[packages]) < max_package_lines:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    texts[packages] += [line for line in f if line.strip()]
    texts[packages] = texts[packages][:max_package_lines]
    return texts


def import_ms(runs: int = 5) -> float:
    """The scanner's own import time (ms) in a fresh interpreter, memdir already loaded (the
    CLI's case: it imports the scanner only on a write), the median of `runs`."""
    code = (
        "import time, memdir.errors; t = time.perf_counter(); import memdir.secret_scan; "
        "print((time.perf_counter() - t) * 1000)"
    )
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(runs)
    ]
    return sorted(times)[len(times) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--locomo",
        default=os.path.join(common.BENCH_DIR, "..", "..", "shared", "bench", "locomo-dev.json"),
    )
    parser.add_argument("--code-lines", type=int, default=30000)
    parser.add_argument("--package-lines", type=int, default=100000)
    parser.add_argument("--samples", type=int, default=5, help="samples of each format")
    parser.add_argument("--out-dir", default=common.RESULTS_DIR)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-dir", help="unused")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    formats = []
    for name, make in secret_samples.formats(rng).items():
        samples = [make() for _ in range(args.samples)]
        missed = [text for text in samples if find(text) is None]
        formats.append(
            {"format": name, "samples": len(samples), "caught": len(samples) - len(missed)}
        )
    targets = secret_samples.evasion_targets(rng)
    evasions = []
    for kind, hide in secret_samples.evasions().items():
        hidden = [hide(secret) for secret in targets.values()]
        caught = sum(1 for text in hidden if find(text) is not None)
        evasions.append({"evasion": kind, "samples": len(hidden), "caught": caught})

    rows: list[dict[str, Any]] = []
    texts = corpus(args.locomo, args.code_lines, args.package_lines)
    texts["clean texts with tricky words"] = list(secret_samples.CLEAN)
    for name, items in texts.items():
        start = time.perf_counter()
        flagged = [(t, f) for t in items if (f := find(t)) is not None]
        seconds = time.perf_counter() - start
        rows.append(
            {
                "corpus": name,
                "texts": len(items),
                "flagged": len(flagged),
                "rate": len(flagged) / len(items) if items else 0.0,
                "us_per_text": 1e6 * seconds / max(1, len(items)),
                "examples": [f"{f[0]}: {t.strip()[:80]}" for t, f in flagged[:5]],
            }
        )
    big = "\n".join(texts["code (stdlib lines)"][:20000]) or "x"
    start = time.perf_counter()
    find(big)
    big_ms = 1000 * (time.perf_counter() - start)
    imported = import_ms()

    common.print_table(
        "secret scanner: synthetic secrets caught per format",
        [("format", "format", ""), ("samples", "samples", ",d"), ("caught", "caught", ",d")],
        formats,
    )
    common.print_table(
        "secret scanner: evasions caught per kind",
        [("evasion", "evasion", ""), ("samples", "samples", ",d"), ("caught", "caught", ",d")],
        evasions,
    )
    common.print_table(
        "secret scanner: false positives on clean text",
        [
            ("corpus", "corpus", ""),
            ("texts", "texts", ",d"),
            ("flagged", "flagged", ",d"),
            ("rate", "rate", ".4f"),
            ("us_per_text", "µs/text", ".1f"),
        ],
        rows,
    )
    for row in rows:
        for example in row["examples"]:
            print(f"  flagged in {row['corpus']}: {example}")
    formats_caught = sum(1 for f in formats if f["caught"] == f["samples"])
    evasions_caught = sum(1 for e in evasions if e["caught"] == e["samples"])
    summary = {
        "formats": len(formats),
        "formats_caught": formats_caught,
        "samples_caught": sum(f["caught"] for f in formats) / sum(f["samples"] for f in formats),
        "evasion_kinds": len(evasions),
        "evasion_kinds_caught": evasions_caught,
        "evasions_caught": sum(e["caught"] for e in evasions) / sum(e["samples"] for e in evasions),
        "false_positive_rate": max(r["rate"] for r in rows) if rows else 0.0,
        "us_per_text": max(r["us_per_text"] for r in rows) if rows else 0.0,
        "ms_for_20k_lines_text": big_ms,
        "import_ms": imported,
    }
    print(
        f"formats caught {formats_caught}/{len(formats)}, evasion kinds caught "
        f"{evasions_caught}/{len(evasions)}, false positives {summary['false_positive_rate']:.4%}"
        f", import {imported:.1f} ms, a {len(big):,}-char text in {big_ms:.0f} ms"
    )
    common.write_result(
        NAME,
        args.out_dir,
        {"locomo": args.locomo, "samples": args.samples, "seed": args.seed},
        [
            *({"table": "formats", **f} for f in formats),
            *({"table": "evasions", **e} for e in evasions),
            *({"table": "clean", **r} for r in rows),
        ],
        summary,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
