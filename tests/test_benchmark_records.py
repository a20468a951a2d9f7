"""The result files the benchmark record names by SHA-256 still hold those bytes.

BENCHMARKS.md and the pre-registrations cite each kept output as `` `bench/results/FILE` (SHA-256 `abcd1234…`) ``
(or `` (`abcd1234…`) ``, or `` (27 lines, SHA-256 `abcd1234…`) ``): the prefix is what a reader checks the evidence against. A result file rewritten
after its figures were recorded (a re-export, a rerun under the same name) must fail here, not go unnoticed.
References written with brace shorthand (`base-{fam,champ}-….json`, several files and hashes in one) are not
parsed; every other citation is.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"`(bench/results/[^`\s{}]+)`\s*\((?:[^()`]*SHA-256\s*)?`([0-9a-f]{8,64})…?`")


def citations(doc: Path) -> list[tuple[str, str]]:
    return CITATION.findall(doc.read_text(encoding="utf-8"))


def test_every_cited_result_file_has_the_cited_sha256() -> None:
    docs = [ROOT / "BENCHMARKS.md", *sorted((ROOT / "bench" / "preregistered").glob("*.md"))]
    cited = [(doc.name, path, prefix) for doc in docs for path, prefix in citations(doc)]
    # The record cites 40-odd outputs today; far fewer means the pattern stopped matching, not that they left.
    assert len(cited) >= 40, cited
    wrong = []
    for doc, path, prefix in cited:
        file = ROOT / path
        digest = hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else "missing"
        if not digest.startswith(prefix):
            wrong.append(f"{doc}: {path} cited as {prefix}…, is {digest[:12]}")
    assert not wrong, "\n".join(wrong)


def test_the_citation_pattern_reads_both_forms_and_skips_shorthand() -> None:
    text = ("`bench/results/a.json` (SHA-256 `cc29f53a…`, the JSON), `bench/results/b.jsonl` (`bb2c4d04…`, "
            "attempts); `bench/results/c-{x,y}.json` (`e401edb1…`); `bench/results/d.json` (400 attempts); "
            "`bench/results/e.jsonl` (27 lines, SHA-256 `461592f5…`)")
    assert CITATION.findall(text) == [("bench/results/a.json", "cc29f53a"), ("bench/results/b.jsonl", "bb2c4d04"),
                                      ("bench/results/e.jsonl", "461592f5")]
