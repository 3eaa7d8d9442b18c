"""`manage.py evaluate --answers` on the labelled set, against the fake Ollama server answering like a
careful small model (the context sentence closest to the question, or "not enough information"):
every figure is reported, each question is accounted for, bad input is a clear error."""

import json
from dataclasses import replace
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ragchat.evaluation.answers import ANSWER_SET, has_fact, load_answer_set, says_dont_know


def test_the_labelled_set_has_enough_questions_of_each_kind():
    questions = load_answer_set()
    answerable = [q for q in questions if q.answerable]
    unanswerable = [q for q in questions if not q.answerable]
    assert len(answerable) >= 40 and len(unanswerable) >= 20
    assert {q.corpus for q in questions} == {"demo", "eval"}
    assert len({q.id for q in questions}) == len(questions)
    # some unanswerable ones are answered in documents the asker may not read
    assert any("asker" in q.why for q in unanswerable)


def test_facts_and_declines_are_recognised():
    assert has_fact("The budget is 1,200 GBP per year.", ["1200 GBP"])
    assert not has_fact("Call extension 5551.", ["555"])
    assert has_fact("Laptops are replaced every four years.", ["four years"])
    assert says_dont_know("I don't have enough information in the available documents to answer this question.")
    assert says_dont_know("The context does not provide information about a dress code.")
    assert not says_dont_know("The fiscal year runs from 1 April to 31 March.")


@pytest.fixture
def answer_settings(settings, tmp_path, fake_ollama):
    settings.RAG = replace(
        settings.RAG,
        qdrant_path=str(tmp_path / "live-qdrant"),
        ollama_base_url=fake_ollama.url,
        embedding_backend="hashing",
        embedding_model="hashing-384",
        # the hashing embedder's cosines sit lower than a trained model's: its floor is lower too
        rag_min_similarity_score=0.05,
    )
    fake_ollama.token_delay(0.0)
    return settings.RAG


def run_answers(tmp_path, *extra, section="manage.py evaluate --answers"):
    """`evaluate --answers` with `extra` options: (the JSON report, what it printed, its figures by
    name). The run records its headline figures in `section` of the figures file given."""
    out = StringIO()
    figures = tmp_path / "benchmarks.json"
    call_command(
        "evaluate",
        "--answers",
        "--json",
        str(tmp_path / "answers.json"),
        "--figures",
        str(figures),
        *extra,
        stdout=out,
        stderr=StringIO(),
    )
    rows = {row["figure"]: row["value"] for row in json.loads(figures.read_text())[section]["figures"]}
    assert "answerable answers with >=1 valid citation" in rows
    return json.loads((tmp_path / "answers.json").read_text()), out.getvalue(), rows


@pytest.mark.parametrize("cite", [True, False], ids=["model-cites", "model-writes-no-citation"])
def test_answers_report_every_figure_through_the_pipeline(answer_settings, fake_ollama, tmp_path, cite):
    fake_ollama.reply_from_context(cite=cite)
    report, text, _ = run_answers(tmp_path)
    summary = report["summary"]
    questions = load_answer_set()
    assert summary["questions"] == len(questions) == len(report["per_question"])
    for key in (
        "fact_in_answer",
        "answerable_cited",
        "uncited_supported_sentences",
        "false_dont_know",
        "answerable_routed",
        "unanswerable_routed",
        "hallucinated_not_routed",
        "seconds_per_answer",
    ):
        assert key in summary, key
    assert "seconds per answer" in text and "routed" in text
    assert not (tmp_path / "live-qdrant").exists(), "the answer evaluation must never open the live store"
    rows = {r["id"]: r for r in report["per_question"]}
    # the extracting model finds most facts in what retrieval gave it
    assert summary["fact_in_answer"] >= 0.7
    # the assertions of the hostile-documents tests hold for every answer of the set as well
    for row in rows.values():
        assert "verified" not in row["answer"].lower()
    # whether the model cites what it copies or writes no marker at all, every answer that states
    # something carries a valid citation and no supported sentence is left uncited
    assert summary["uncited_supported_sentences"] == 0, summary["failing"]["uncited_supported"]
    assert summary["answerable_cited_excluding_dont_know"] >= 0.95, summary["failing"]["no_valid_citation"]
    attributed = sum(r["attributed"] for r in rows.values())
    assert (attributed == 0) if cite else (attributed >= summary["answerable"] * 0.8)


def test_answers_refuse_a_broken_labelled_set(answer_settings, tmp_path):
    broken = tmp_path / "set.jsonl"
    broken.write_text('{"id": "x", "corpus": "demo", "question": "?", "tags": [], "answerable": true}\n')
    with pytest.raises(CommandError, match="expected facts"):
        call_command("evaluate", "--answers", "--answer-set", str(broken), stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="give --answers"):
        call_command("evaluate", "--real-model", stdout=StringIO(), stderr=StringIO())


def test_the_shipped_set_is_the_default():
    assert ANSWER_SET.name == "answer_set.jsonl" and ANSWER_SET.exists()


@pytest.mark.parametrize("habit", ["none", "numbered", "invented"])
def test_answers_keep_their_promises_on_the_product_embedder(settings, tmp_path, fake_ollama, habit):
    """The targets on the labelled set, with the embedder the product runs (all-MiniLM-L6-v2 through
    ONNX) and the careful extracting model in a citation habit: no marker at all, "[1]"-style
    numbers, and real citations mixed with invented ids. Every answerable answer that does not
    decline is cited; no supported sentence is left uncited; no answer stated in one passage is
    declined; at most 10 % of answerable questions and at least 90 % of unanswerable ones go to a
    person."""
    settings.RAG = replace(
        settings.RAG,
        qdrant_path=str(tmp_path / "live-qdrant"),
        ollama_base_url=fake_ollama.url,
        embedding_backend="local",
        embedding_model="all-MiniLM-L6-v2",
    )
    fake_ollama.token_delay(0.0)
    fake_ollama.reply_from_context(cite=habit != "none")
    if habit != "none":
        fake_ollama.habits(citations=habit)
    report, _, _ = run_answers(tmp_path)
    summary, failing = report["summary"], report["summary"]["failing"]
    assert summary["answerable_cited_excluding_dont_know"] == 1.0, failing["no_valid_citation"]
    assert summary["answerable_cited"] >= 0.95, failing["no_valid_citation"]
    assert summary["uncited_supported_sentences"] == 0, failing["uncited_supported"]
    assert summary["false_dont_know"] == 0, failing["false_dont_know"]
    assert summary["answerable_routed"] <= 0.10, failing["answerable_routed"]
    assert summary["unanswerable_routed"] >= 0.90, failing["unanswerable_not_routed"]


def test_the_test_server_answers_in_each_habit_named(answer_settings, tmp_path):
    """`--test-server`: the command starts the test server's careful model itself and answers the set
    once per citation habit; the figures file gets one section for the run, a figure alike in
    every habit said once."""
    command = "manage.py evaluate --answers --test-server none,numbered --sample 12"
    report, text, rows = run_answers(tmp_path, "--test-server", "none,numbered", "--sample", "12", section=command)
    report = report["habits"]
    assert set(report) == {"none", "numbered"}
    for habit in report.values():
        assert habit["summary"]["questions"] == 12
        assert habit["summary"]["uncited_supported_sentences"] == 0
    assert "== test server, habit numbered" in text
    assert rows["model; labelled questions; citation habits"].endswith("2 (none, numbered)")
    assert rows["supported sentences without a citation"].startswith("0 of ")
    assert not any(figure.startswith("seconds") for figure in rows)
    with pytest.raises(CommandError, match="name habits of"):
        call_command("evaluate", "--answers", "--test-server", "telepathic", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="one model at a time"):
        call_command(
            "evaluate", "--answers", "--real-model", "--test-server", "none", stdout=StringIO(), stderr=StringIO()
        )
