"""Values a hostile or buggy client may put in any field, as hypothesis strategies: lone
surrogates, NaN and infinities, integers past 64 bits, nesting; one fixed seed per run."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Lone surrogates (category Cs) beside ASCII and the rest of Unicode.
TEXT = st.text(
    st.one_of(
        st.characters(categories=["Cs"]),
        st.characters(max_codepoint=0x7F),
        st.characters(min_codepoint=0x80),
    ),
    max_size=6,
)


def values(int_bits: int = 80, binary: bool = False) -> st.SearchStrategy[object]:
    """Any plain value: integers within ``int_bits`` bits (msgpack carries 64), bytes where
    ``binary`` (msgpack), NaN and the infinities, text with lone surrogates, nesting."""
    low, high = (-(2**63), 2**64 - 1) if int_bits == 64 else (-(2**int_bits), 2**int_bits)
    scalars = st.one_of(st.none(), st.booleans(), st.integers(low, high), st.floats(), TEXT)
    if binary:
        scalars |= st.binary(max_size=3)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)
        ),
        max_leaves=6,
    )


HOSTILE_SETTINGS = settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
