"""Plumbing every part of brawlkit shares: where the checkout and its native
build are, atomic file writes, thread limits.  Standard library only, so the
PARENA compiler (run by the native build with any Python) can import it."""
