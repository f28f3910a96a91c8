"""Sibling tools: the lint flags real confusable pairs, says what tells them apart, and spares
real distinct ones; the join finds exactly what comparing every pair finds.

The labelled pairs are tests/fixtures/siblings/pairs.json (public tool catalogs,
with their sources); benchmarks/siblings.py prints precision and recall on them.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from veridic import Registry
from veridic.lint import DEFAULT_THRESHOLD, lint
from veridic.tools._similarity import ToolText, naive_similar_pairs, similar_pairs

PAIRS = json.loads((Path(__file__).parent / "fixtures" / "siblings" / "pairs.json").read_text())


def labelled() -> list[tuple[str, str, bool, bool]]:
    """Each labelled pair: its two names, whether it is siblings, whether the lint flags it."""
    catalogs: dict[str, dict[str, ToolText]] = {}
    for pair in PAIRS["pairs"]:
        for tool in pair["tools"]:
            catalogs.setdefault(tool["path"], {})[tool["name"]] = ToolText(
                tool["description"], tuple(tool["parameters"])
            )
    found = []
    for pair in PAIRS["pairs"]:
        first, second = pair["tools"]
        registry = {**catalogs[first["path"]], **catalogs[second["path"]]}
        flagged = {
            (p.first, p.second) for p in similar_pairs(registry, threshold=DEFAULT_THRESHOLD)
        }
        names = tuple(sorted((first["name"], second["name"])))
        found.append((*names, pair["label"] == "siblings", names in flagged))
    return found


def test_labelled_set_is_real_pairs_with_sources_about_half_siblings() -> None:
    pairs = PAIRS["pairs"]
    assert len(pairs) >= 60
    siblings = sum(pair["label"] == "siblings" for pair in pairs)
    assert 0.4 <= siblings / len(pairs) <= 0.6
    for pair in pairs:
        assert pair["label"] in ("siblings", "distinct")
        assert pair["reason"]
        for tool in pair["tools"]:
            assert tool["repository"] in PAIRS["commits"]
            assert tool["path"]
            assert tool["description"]


def test_default_threshold_keeps_precision_and_recall_measured_on_the_labelled_set() -> None:
    found = labelled()
    flagged = [siblings for *_, siblings, hit in found if hit]
    recall = sum(flagged) / sum(siblings for *_, siblings, _ in found)
    assert sum(flagged) / len(flagged) >= 0.8  # a finding fails CI: most must be right
    assert recall >= 0.4


def test_copy_pasted_descriptions_are_flagged_and_opposites_are_not() -> None:
    flagged = {(a, b) for a, b, _, hit in labelled() if hit}
    assert ("search_direct_flight", "search_onestop_flight") in flagged  # tau-bench
    assert ("list_directory", "list_directory_with_sizes") in flagged  # MCP filesystem
    assert ("star_repository", "unstar_repository") not in flagged  # github-mcp-server
    assert ("follow_user", "unfollow_user") not in flagged  # BFCL
    assert ("gallon_to_liter", "liter_to_gallon") not in flagged  # BFCL


def test_words_that_tell_siblings_apart_are_named() -> None:
    [pair] = similar_pairs(
        {
            "get_hotels": ToolText("Get the hotels in a city.", ("city",)),
            "get_hotel_names": ToolText("Get the hotel names in a city.", ("city",)),
            "book_flight": ToolText("Book a flight between two airports.", ("origin", "to")),
        },
        threshold=DEFAULT_THRESHOLD,
    )
    assert (pair.first, pair.second) == ("get_hotel_names", "get_hotels")
    assert (pair.first_only, pair.second_only) == (("names",), ())


def test_one_word_that_is_the_whole_difference_is_flagged_with_that_word() -> None:
    [pair] = similar_pairs(
        {
            "delete_ticket": "Delete a ticket so it leaves the open queue.",
            "archive_ticket": "Archive a ticket so it leaves the open queue.",
        },
        threshold=DEFAULT_THRESHOLD,
    )
    assert (pair.first_only, pair.second_only) == (("Archive",), ("Delete",))
    assert pair.opposites is None


def test_opposites_halve_the_score() -> None:
    texts = {
        "add_label": "Add a label to an issue.",
        "remove_label": "Remove a label from an issue.",
    }
    [pair] = naive_similar_pairs(texts, threshold=0.05)
    assert pair.opposites == ("add", "remove")
    assert similar_pairs(texts, threshold=DEFAULT_THRESHOLD) == []


def test_sentence_every_tool_repeats_is_boilerplate_not_likeness() -> None:
    shared = "This tool belongs to the trading system, which lets users trade stocks."
    texts = {
        "get_watchlist": f"{shared} Get the watchlist.",
        "get_account_info": f"{shared} Get account information.",
        "cancel_order": f"{shared} Cancel an order.",
    }
    assert similar_pairs(texts, threshold=DEFAULT_THRESHOLD) == []
    # two tools alone that share it are alike: it is what the model reads of both
    two = {name: texts[name] for name in ("get_watchlist", "get_account_info")}
    assert [(p.first, p.second) for p in similar_pairs(two, threshold=0.3)] == [
        ("get_account_info", "get_watchlist")
    ]


def test_lint_finding_names_both_tools_where_they_are_the_words_and_the_fixes() -> None:
    registry = Registry("siblings")

    @registry.tool(kind="query")
    def get_article_draft(article_id: int) -> str:
        """Return the draft of an article, with its title, body and tags.

        Args:
            article_id: The article to read.
        """
        return str(article_id)

    @registry.tool(kind="query")
    def get_article_published(article_id: int) -> str:
        """Return the published version of an article, with its title, body and tags.

        Args:
            article_id: The article to read.
        """
        return str(article_id)

    [finding] = lint(registry)
    assert (finding.code, finding.tool, finding.other) == (
        "near-duplicate",
        "get_article_draft",
        "get_article_published",
    )
    assert finding.file is not None
    assert finding.file.endswith("test_siblings.py")
    assert f"test_siblings.py:{finding.line}" in finding.message
    assert '"draft" (get_article_draft only)' in finding.message
    assert '"published", "version" (get_article_published only)' in finding.message
    assert "when to use it rather than the other" in finding.message
    assert '[["get_article_draft", "get_article_published"]]' in finding.message
    [listed] = lint(registry, siblings=[["get_article_draft", "get_article_published"]])
    assert (listed.code, listed.severity) == ("near-duplicate-acknowledged", "info")


_WORDS = st.sampled_from(
    [
        *("delete", "user", "ticket", "archive", "close", "the", "open", "queue", "read"),
        *("a", "x", "add", "remove", "unread", "Tickets", "users", ".", "Only works here."),
    ]
)
_PARAMETERS = st.lists(
    st.sampled_from(["ticket_id", "userId", "note", "x"]), max_size=3, unique=True
)


@given(
    tools=st.dictionaries(
        st.from_regex(r"(add|remove|un)?[a-z]{1,5}(_[a-z]{1,3})?", fullmatch=True),
        st.builds(
            ToolText,
            st.lists(_WORDS, max_size=12).map(" ".join),
            _PARAMETERS.map(tuple),
        ),
        max_size=12,
    ),
    threshold=st.floats(min_value=0.05, max_value=1.0),
)
def test_property_join_finds_the_pairs_and_scores_of_all_pairs(
    tools: dict[str, ToolText], threshold: float
) -> None:
    assert similar_pairs(tools, threshold=threshold) == naive_similar_pairs(
        tools, threshold=threshold
    )
