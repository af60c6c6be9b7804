"""The model side of a step: loading, the flat batch, attention backends, sampling."""
