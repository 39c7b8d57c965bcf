"""kegen's tests: a package, so each test module is imported by its full name (no sys.path edits)."""
