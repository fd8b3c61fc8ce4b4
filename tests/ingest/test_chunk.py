import pytest

from schemas.embedding import EmbeddingInputTooLong
from schemas.lineage import Element, ParsedDocument, ParsedPage
from schemas.settings import EmbeddingSettings
from tasks.ingest.chunk import PAGE_JOINER, chunk_document, chunk_spec, sentence_spans
from tasks.embedding import load_embedder
from tasks.ingest.parse.normalize import normalize_text


@pytest.fixture(scope="module")
def embedder():
    return load_embedder(EmbeddingSettings(model="minilm"))


def _doc(pages: list[str], boxes: bool = False) -> ParsedDocument:
    out = []
    for n, text in enumerate(pages, start=1):
        elements = []
        if boxes:
            cursor = 0
            for i, para in enumerate(text.split("\n\n")):
                elements.append(Element(char_start=cursor, char_end=cursor + len(para),
                                        bbox=(10.0, 20.0 + 30 * i, 500.0, 45.0 + 30 * i)))
                cursor += len(para) + 2
        out.append(ParsedPage(page_no=n, raw_text=text, normalized_text=normalize_text(text),
                              parser="test", parser_version="1", elements=elements))
    return ParsedDocument(revision_id="rtest", pages=out)


def test_sentence_spans_trim_and_split_on_french_punctuation():
    text = "La séance est ouverte. « Très bien ! » dit M. Floquet.\n\nNouvel alinéa"
    spans = [text[a:b] for a, b in sentence_spans(text)]
    assert spans[0] == "La séance est ouverte."
    assert spans[-1] == "Nouvel alinéa"


def test_chunks_never_exceed_the_model_limit_counted_by_its_tokenizer(embedder):
    spec = chunk_spec(embedder.count_tokens, 60, embedder.space.max_input_tokens, "t")
    sentence = "Le ministre de l'intérieur répond à l'interpellation sur les incendies du canton. "
    monster = " ".join(["anticonstitutionnellement"] * 400)  # one sentence far over the limit
    chunks = chunk_document(_doc([sentence * 30 + monster]), "d", spec, embedder.count_tokens)
    counts = embedder.count_tokens([c.text for c in chunks])
    assert max(counts) <= embedder.space.max_input_tokens
    assert all(c.n_tokens == n for c, n in zip(chunks, counts))
    assert len(chunks) > 10


def test_offsets_point_into_raw_text_and_ids_are_deterministic(embedder):
    spec = chunk_spec(embedder.count_tokens, 40, embedder.space.max_input_tokens, "t")
    pages = ["Première page. " * 20, "Deuxième   page,\navec un mot coupé en fin de li-\ngne. " * 10]
    doc = _doc(pages)
    a = chunk_document(doc, "d", spec, embedder.count_tokens)
    b = chunk_document(doc, "d", spec, embedder.count_tokens)
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
    raw = PAGE_JOINER.join(pages)
    for c in a:
        assert c.text == normalize_text(raw[c.char_start:c.char_end])
    assert {c.page_start for c in a} == {1, 2}
    assert "ligne" in " ".join(c.text for c in a)  # hyphenation joined in normalised text only


def test_chunks_carry_page_and_box_spans(embedder):
    spec = chunk_spec(embedder.count_tokens, 30, embedder.space.max_input_tokens, "t")
    page = "\n\n".join(f"Paragraphe numéro {i} du registre des délibérations." for i in range(6))
    chunks = chunk_document(_doc([page], boxes=True), "d", spec, embedder.count_tokens)
    assert all(c.spans and c.spans[0].bbox is not None for c in chunks)
    first = chunks[0].spans[0].bbox
    assert first[0] == 10.0 and first[1] == 20.0


def test_embedder_refuses_over_limit_input_instead_of_truncating(embedder):
    with pytest.raises(EmbeddingInputTooLong):
        embedder.embed_documents(["mot " * 1000])


@pytest.mark.timeout(120)
def test_chunking_terminates_when_word_counts_underestimate_the_tokenizer():
    # e5's sentencepiece counts "a" or "," as nothing in isolation but not in context, so a
    # greedy word packing can overshoot; the exact check must re-split, never loop forever.
    e5 = load_embedder(EmbeddingSettings(model="e5"))
    spec = chunk_spec(e5.count_tokens, 200, e5.space.max_input_tokens, "e5")
    text = " ".join(["a , à l' de M. le 1887 ; y a-t-il"] * 400)  # no sentence end at all
    chunks = chunk_document(_doc([text]), "d", spec, e5.count_tokens)
    counts = e5.count_tokens([c.text for c in chunks])
    assert max(counts) <= e5.space.max_input_tokens
    assert max(n - spec.overhead_tokens for n in counts) <= spec.content_limit + 8


def test_a_document_without_text_has_no_chunks_and_the_tokenizer_takes_an_empty_batch(embedder):
    spec = chunk_spec(embedder.count_tokens, 60, embedder.space.max_input_tokens, "t")
    assert embedder.count_tokens([]) == []
    assert chunk_document(_doc(["", "  \n "]), "d", spec, embedder.count_tokens) == []


def test_a_chunks_boxes_are_those_of_every_element_it_overlaps_in_any_order():
    import random

    from tasks.ingest.chunk import _PageBoxes

    rng = random.Random(7)
    elements = []
    for _ in range(300):  # out of order, nested and overlapping, some without a box
        start = rng.randrange(0, 1000)
        elements.append(Element(char_start=start, char_end=start + rng.randrange(1, 120),
                                bbox=None if rng.random() < 0.2 else tuple(float(rng.randrange(500)) for _ in range(4))))
    page = ParsedPage(page_no=1, raw_text="x" * 1200, normalized_text="x", parser="test", parser_version="1",
                      elements=elements)
    boxes = _PageBoxes(page)
    for _ in range(200):
        s = rng.randrange(0, 1100)
        e = s + rng.randrange(1, 200)
        expected = [el.bbox for el in elements if el.bbox is not None and el.char_start < e and el.char_end > s]
        assert sorted(boxes.overlapping(s, e)) == sorted(expected)
