"""Prompt-lookup proposals: the longest recurring suffix, the tokens after its last occurrence."""

from llmkit.engine.core.spec.ngram import NgramProposer


def test_the_tokens_after_the_latest_earlier_occurrence_are_proposed():
    proposer = NgramProposer(num_speculative_tokens=3, lookup_max=3, lookup_min=1)
    assert proposer.propose([1, 2, 3, 4, 5, 1, 2], limit=10) == [3, 4, 5]
    # The later of two occurrences wins, and the proposal stops at the sequence's end.
    assert proposer.propose([7, 1, 9, 1, 8, 1], limit=10) == [8, 1]


def test_the_longest_match_wins_and_limits_hold():
    proposer = NgramProposer(num_speculative_tokens=2, lookup_max=3, lookup_min=1)
    # "2 3" recurs after 5 (bigram) while "3" alone last recurred before 6.
    assert proposer.propose([2, 3, 5, 3, 6, 2, 3], limit=10) == [5, 3]
    assert proposer.propose([2, 3, 5, 3, 6, 2, 3], limit=1) == [5]
    assert proposer.propose([2, 3, 5, 3, 6, 2, 3], limit=0) == []


def test_nothing_is_proposed_without_a_recurring_ngram():
    proposer = NgramProposer(num_speculative_tokens=4, lookup_max=4, lookup_min=2)
    assert proposer.propose([1, 2, 3, 4, 5, 6], limit=10) == []
    assert proposer.propose([1, 2, 3, 1, 9, 3], limit=10) == []  # only unigrams recur
    # [1, 0]'s bytes lie across the boundaries of [256, 0, 0]: not a match.
    assert proposer.propose([256, 0, 0, 5, 1, 0], limit=10) == []
