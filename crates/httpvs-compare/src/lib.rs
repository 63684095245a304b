//! The protocol matrix: composes serve, load and netem into side-by-side comparisons with verdicts.
