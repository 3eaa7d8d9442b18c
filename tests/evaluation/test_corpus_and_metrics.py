"""The generated evaluation corpus is what the issue asks for, its gold answers are really in the
documents, and the ranking metrics compute what their names say."""

import json
from collections import Counter
from pathlib import Path

import pytest

from ragchat.evaluation import metrics
from ragchat.evaluation.corpus import DOCUMENTS, QUESTIONS, write_corpus
from ragchat.evaluation.runner import corpus_files, document_format, load_questions
from ragchat.services.parsing import parse_document


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def test_corpus_has_20_documents_in_4_tags_in_every_format(corpus):
    folder, _ = corpus
    files = corpus_files(folder)
    assert len(files) == len(DOCUMENTS) >= 20
    tags = {tag for _, tag in files}
    assert len(tags - {"public"}) >= 4
    formats = Counter(Path(path).suffix for path, _ in files)
    assert set(formats) == {
        ".pdf",
        ".docx",
        ".html",
        ".md",
        ".txt",
        ".pptx",
        ".xlsx",
        ".csv",
        ".odt",
        ".ods",
        ".odp",
    } | {
        ".rtf",
        ".eml",
    }
    assert all(count >= 4 for suffix, count in formats.items() if suffix in {".pdf", ".docx", ".html", ".md", ".txt"})


def test_the_corpus_files_are_read_as_the_format_their_name_says(corpus):
    folder, _ = corpus
    for path, _ in corpus_files(folder):
        parsed = parse_document(data=(folder / path).read_bytes(), filename=Path(path).name)
        assert document_format(path) == {"markdown": "md", "text": "txt"}.get(parsed.kind, parsed.kind), path


def test_table_questions_are_answered_by_a_row_carrying_its_header(corpus):
    """A table question's support phrase is a labelled cell ("Approval needed: UK budget holder") or
    a value, and it sits in one row block of its document."""
    folder, _ = corpus
    table_questions = [q for q in QUESTIONS if q.kind == "table"]
    assert len(table_questions) >= 15
    for question in table_questions:
        path = question.relevant_documents[0]
        parsed = parse_document(data=(folder / path).read_bytes(), filename=Path(path).name)
        rows = [block.text for block in parsed.blocks if block.is_row]
        assert any(question.support_phrases[0].lower() in row.lower() for row in rows), question.question


def test_gold_questions_cover_follow_ups_acronyms_names_and_codes(corpus):
    _, questions_path = corpus
    questions = load_questions(questions_path)
    assert len(questions) == len(QUESTIONS) >= 50
    kinds = Counter(q.kind for q in questions)
    assert {"follow-up", "acronym", "name", "code"} <= set(kinds)
    assert all(q.history for q in questions if q.kind == "follow-up")
    raw = [json.loads(line) for line in questions_path.read_text().splitlines()]
    assert all(set(r) >= {"question", "relevant_documents"} for r in raw)


def test_every_support_phrase_is_in_a_relevant_document(corpus):
    folder, _ = corpus
    texts = {}
    for path, _ in corpus_files(folder):
        parsed = parse_document(data=(folder / path).read_bytes(), filename=Path(path).name)
        texts[path] = " ".join(block.text for block in parsed.blocks)
    for q in QUESTIONS:
        assert set(q.relevant_documents) <= set(texts), q.question
        for phrase in q.support_phrases:
            assert metrics.has_support([texts[p] for p in q.relevant_documents], [phrase]), (q.question, phrase)


def test_ranking_metrics():
    ranked = metrics.ranked_documents(["a", "b", "a", "c", "d"])
    assert ranked == ["a", "b", "c", "d"]
    assert metrics.recall_at(ranked, {"b", "x"}, 1) == 0.0
    assert metrics.recall_at(ranked, {"b", "x"}, 5) == 0.5
    assert metrics.reciprocal_rank(ranked, {"c"}) == pytest.approx(1 / 3)
    assert metrics.reciprocal_rank(ranked, {"x"}) == 0.0
    assert metrics.ndcg_at(ranked, {"a"}, 10) == 1.0
    assert metrics.ndcg_at(ranked, {"b"}, 10) == pytest.approx(1 / 1.5849625)
    assert metrics.ndcg_at(ranked, {"d"}, 3) == 0.0


def test_support_ignores_case_and_line_breaks():
    assert metrics.has_support(["Leave is 28\ndays per YEAR"], ["28 days"])
    assert not metrics.has_support(["Leave is 27 days"], ["28 days"])
