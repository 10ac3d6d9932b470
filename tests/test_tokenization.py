from __future__ import annotations

from hypothesis import given, settings, strategies as st

from hybridmem.config import TokenizerConfig
from hybridmem.tokenization import fts_query, query_terms, token_spans, tokenize


def test_case_folding_and_stemming():
    assert tokenize("Retries RETRYING retried") == ["retri", "retri", "retri"]
    assert tokenize("Retries", TokenizerConfig(stem=False)) == ["retries"]


def test_vietnamese_diacritics_fold_both_ways():
    assert tokenize("thanh toán hóa đơn") == ["thanh", "toan", "hoa", "don"]
    assert tokenize("Thanh Toán") == tokenize("thanh toan")
    assert tokenize("Nguyễn Văn Ánh") == ["nguyen", "van", "anh"]


def test_chinese_bigrams():
    assert tokenize("支付处理器") == ["支付", "付处", "处理", "理器"]
    assert tokenize("付") == ["付"]


def test_japanese_mixed_scripts_and_latin():
    toks = tokenize("決済サービスのAPI")
    assert toks[:3] == ["決済", "済サ", "サー"] and "api" in toks


def test_thai_has_tokens_with_marks_kept():
    toks = tokenize("การชำระเงิน")
    assert len(toks) >= 5 and all(len(t) == 2 for t in toks)
    assert set(tokenize("ชำระเงิน")) <= set(toks)  # a substring's grams are a subset: findable by keyword


def test_identifiers_whole_and_parts():
    assert tokenize("payment_processor") == ["paymentprocessor", "payment", "processor"]
    assert tokenize("paymentProcessor") == ["paymentprocessor", "payment", "processor"]
    assert tokenize("HTTPServer") == ["httpserver", "http", "server"]
    assert tokenize("ERR_CONN_RESET")[0] == "errconnreset"
    assert tokenize("E1042") == ["e1042"]


def test_spans_point_into_original_text():
    text = "See fetchUserProfile in thanh toán"
    for tok, s, e in token_spans(text):
        assert 0 <= s < e <= len(text)
    assert ("fetchuserprofil", 4, 20) not in token_spans(text)
    assert ("fetchuserprofile", 4, 20) in token_spans(text)


def test_fts_query_or_mode_drops_stopwords_and_quotes_terms():
    assert fts_query("what is the payment_processor retry?") == (
        '"paymentprocessor" OR "payment" OR "processor" OR "retri"'
    )
    assert fts_query("the of and") == '"the" OR "of" OR "and"'  # only stopwords: keep them
    assert fts_query("") is None and fts_query("  !!! ") is None
    assert fts_query("a b", TokenizerConfig(query_mode="and", query_stopwords=False)) == '"a" AND "b"'


def test_fts_syntax_is_never_passed_through():
    for hostile in ['NEAR(a b)', 'title:x*', '"unterminated', 'a AND (b OR -c)', "^x", "a + b", "col : {x y}"]:
        q = fts_query(hostile)
        assert q is not None
        for term in q.split(" OR "):
            assert term.startswith('"') and term.endswith('"') and '"' not in term[1:-1]


def test_query_terms_are_capped():
    assert len(query_terms(" ".join(f"w{i}" for i in range(1000)))) == TokenizerConfig().max_query_terms


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_tokenize_never_raises_and_tokens_have_no_spaces(text):
    for tok, s, e in token_spans(text):
        assert tok and " " not in tok and '"' not in tok
        assert 0 <= s <= e <= len(text)


def test_compatibility_characters_that_expand_to_phrases_give_one_token_a_word():
    # found by the fuzzer: NFKC turns U+FDFA (one Arabic ligature) into a four-word phrase with spaces
    assert tokenize("\ufdfa") == tokenize("صلى الله عليه وسلم") == ["صلى", "الله", "عليه", "وسلم"]
    assert all(" " not in t for t in tokenize("x\ufdfb y \u3300"))


def test_format_characters_are_separators_as_in_fts5():
    # ZWNJ/ZWJ (category Cf) are not token characters for FTS5's unicode61: a token made of them would never match
    assert tokenize("\u200c") == [] and fts_query("\u200c") is None
    assert tokenize("می\u200cخواهم") == ["می", "خواهم"]
