"""Benchmarks (speed is reported here, never asserted in tests). See BENCHMARKS.md."""


def positive_int(text: str) -> int:
    """argparse type of the bench scripts' counts: an integer >= 1 (argparse turns the
    error into one line and exit 2)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, not {text!r}")
    return value
