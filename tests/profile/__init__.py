"""Tests of kegen (a package, so test modules are imported by their full names)."""
