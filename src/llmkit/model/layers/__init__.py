"""Small building blocks of the native models."""
