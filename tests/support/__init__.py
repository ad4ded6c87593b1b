"""Helpers shared by the test modules: one place for each, imported as ``support.<module>``."""
