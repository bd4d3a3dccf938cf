"""``bench/shape_corpus.py`` counts what it claims: every wrong field, wrong nesting and wrong
type in its corpus is refused before any tool runs, the mistakes no declared shape can see
are not, and no correct plan is refused. In-process, no server (a second)."""

from __future__ import annotations

from bench.shape_corpus import CASES, HEADER, measure, report, table

CAUGHT = ("wrong field", "wrong nesting", "wrong type")


async def test_the_corpus_is_counted_as_the_report_says() -> None:
    measured = await measure()
    assert len(measured) == len(CASES) and len(CASES) >= 30
    for m in measured:
        if m.case.category in CAUGHT:
            assert m.now.rejected and m.now.calls == 0, m.case.name
            if m.case.category != "wrong type":  # a wrong type may be coerced and run on
                assert not m.before.ok, m.case.name  # real: without shapes it fails later
        else:
            assert not m.now.rejected, m.case.name  # no shape rules it out: never refused
        if m.case.category == "correct":
            assert m.now.ok and m.before.ok, m.case.name
    rows = {row[0]: row for row in table(measured)}
    for category in CAUGHT:
        plans, refused = rows[category][1], rows[category][2]
        assert refused == plans  # the count is computed, and it is all of them
    text = report(measured, 0.0, 0.1)
    assert " | ".join(HEADER) in text and "FALSE POSITIVE" not in text
    mistakes = sum(rows[c][1] for c in CAUGHT)
    assert f"{mistakes} of {mistakes} refused before any tool ran" in text
