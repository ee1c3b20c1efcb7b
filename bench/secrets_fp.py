"""False positives of the secret scanner (X2) on ordinary text: the turns of a LoCoMo file
(conversation), Python source from the standard library (code), and memdir's own docs;
plus the share of synthetic secrets of every kind it catches. Prints a table, writes JSON."""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sysconfig
import time
from typing import Any

import common
from memdir.secret_scan import PATTERNS, find

NAME = "secrets_fp"


def corpus(locomo: str | None, max_code_lines: int) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = {"prose (LoCoMo turns)": [], "code (stdlib lines)": []}
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
    return texts


def synthetic_secrets(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits

    def token(k: int, chars: str = alnum) -> str:
        return "".join(rng.choice(chars) for _ in range(k))

    makers = {
        "a private key": lambda: "-----BEGIN EC PRIVATE KEY-----\n" + token(64),
        "an AWS access key id": lambda: "AKIA" + token(16, string.ascii_uppercase + "0123456789"),
        "a GitHub token": lambda: "ghp_" + token(36),
        "a Slack token": lambda: "xoxb-" + token(12, string.digits) + "-" + token(24),
        "an Anthropic API key": lambda: "sk-ant-api03-" + token(40),
        "an OpenAI API key": lambda: "sk-proj-" + token(40),
        "a Google API key": lambda: "AIza" + token(35),
        "a JSON Web Token": lambda: "eyJ" + token(20) + ".eyJ" + token(30) + "." + token(30),
        "a password in a URL": lambda: f"https://bot:{token(14)}@api.example.org/v1",
        "a password value": lambda: "password=" + token(12),
    }
    kinds = list(makers)
    return [
        (kind, f"use {makers[kind]()} for the deploy")
        for kind in (kinds[i % len(kinds)] for i in range(n))
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--locomo",
        default=os.path.join(common.BENCH_DIR, "..", "..", "shared", "bench", "locomo-dev.json"),
    )
    parser.add_argument("--code-lines", type=int, default=30000)
    parser.add_argument("--secrets", type=int, default=1000)
    parser.add_argument("--out-dir", default=common.RESULTS_DIR)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-dir", help="unused")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name, texts in corpus(args.locomo, args.code_lines).items():
        start = time.perf_counter()
        flagged = [(t, find(t)) for t in texts]
        flagged = [(t, f) for t, f in flagged if f is not None]
        seconds = time.perf_counter() - start
        rows.append(
            {
                "corpus": name,
                "texts": len(texts),
                "flagged": len(flagged),
                "rate": len(flagged) / len(texts) if texts else 0.0,
                "us_per_text": 1e6 * seconds / max(1, len(texts)),
                "examples": [f"{f[0]}: {t.strip()[:80]}" for t, f in flagged[:5]],
            }
        )
    secrets = synthetic_secrets(args.secrets, seed=args.seed)
    caught = sum(1 for kind, text in secrets if (f := find(text)) is not None and f[0] == kind)
    rows.append(
        {
            "corpus": f"synthetic secrets ({len(PATTERNS) - 1} kinds + passwords)",
            "texts": len(secrets),
            "flagged": caught,
            "rate": caught / len(secrets),
            "us_per_text": 0.0,
            "examples": [],
        }
    )
    common.print_table(
        "secret scanner: false positives on clean text, and secrets caught",
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
    common.write_result(
        NAME,
        args.out_dir,
        {"locomo": args.locomo},
        rows,
        {
            "false_positive_rate": max(r["rate"] for r in rows[:-1]) if rows[:-1] else 0.0,
            "caught": rows[-1]["rate"],
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
