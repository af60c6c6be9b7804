"""Speculative decoding: the n-gram and draft-model proposers and the check of their
proposals, which the step calls only when speculation is configured."""
