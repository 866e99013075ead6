"""Locality-sensitive hashing: one module per hash family, plus the tables and their rebuild schedule."""
